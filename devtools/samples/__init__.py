"""Sample homes written by the real Mnemosyne API, for ``mnemo-ops demo``, the tests and the
benchmarks: the sample Hermes home (`sample_database`), an aged multi-session conversation home with
its eval suite (`conversations`), a week of sessions stating known lessons (`reflection_week`),
realistic generated rows for scale (`realistic_memories`) and the older uniform ones for small unit
fixtures (`synthetic_memories`). Nothing here is used by a job."""
