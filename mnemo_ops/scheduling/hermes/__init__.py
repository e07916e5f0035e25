"""The jobs as Hermes' own script-only cron jobs: ``$HERMES_HOME/cron/jobs.json`` and one script each.

What Hermes does (hermes-agent's cron, docs/hermes.md): it keeps its jobs in ``cron/jobs.json``
(``{"jobs": [...], "updated_at": ...}``), every writer holds ``fcntl.flock`` on ``cron/.jobs.lock``
and replaces the file atomically, and a job with ``no_agent: true`` runs its ``script`` and delivers
its trimmed stdout. This package writes our entries and scripts into that home and nothing else, one
module per concern: `paths` (where Hermes keeps things, which entries are ours), `jobs_file` (jobs.json
read and rewritten as text, so foreign entries keep their exact bytes), `jobs_lock` (Hermes' writer
lock), `config` (Hermes' time zone and script timeout), `scripts` (the bash script of each job),
`entries` (the fields of our jobs.json entries) and `install` (install, uninstall and status: plans
computed read-only, applied under the lock).
"""
