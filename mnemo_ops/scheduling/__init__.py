"""Where and when the jobs run: every scheduler's files rendered from the same effective manifests
(`core.manifests.effective_manifests`) and the same command line (`invocation`): a crontab block
(`crontab`), systemd services and timers (`systemd`, `calendar`), Kubernetes CronJobs
(`kubernetes`) and Hermes' own cron jobs (`hermes/`); plus where each job is installed now
(`installations`) and the schedule view shared by ``jobs``, the audit and the report (`job_table`)."""
