"""The nightly-selfcare job's concerns: the read-only audits of the home (`audits/`), quarantine
(files staged instead of deleted, and put back), the daily row counts behind the report's growth
figures (`row_count_history`), and the morning report, built (`report`) and rendered
(`report_render`)."""
