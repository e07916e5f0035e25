"""Homes written by the real Mnemosyne API for the tests and the benchmarks: an aged
multi-session conversation home with its eval suite (`conversations`), homes written through the
Hermes plugin (`hermes_conversations`, `hermes_dialogue`), a week of sessions stating known lessons
(`reflection_week`), realistic generated rows for scale (`realistic_memories`) and the older
uniform ones for small unit fixtures (`synthetic_memories`). The demo's own home is
``mnemo_ops.mnemosyne.sample_home``; nothing here is used by a job."""
