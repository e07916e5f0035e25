"""bridge-drain: items captured into the spool (``mnemo-ops capture``, other tools) are stored in
Mnemosyne exactly once.

- `items`: one queue file parsed and validated (bad ones go to ``failed/`` with their reason);
- `spool`: the Maildir-style folders (``new/``, ``cur/``, ``failed/``), no symlink followed;
- `ingest`: each item through Mnemosyne's own remember, its key stored with the row;
- `drain`: one run over the spool; `job`: the job's ``run(ctx)``.

Options: the ``bridge_drain`` section. Manifest: ``jobs/bridge-drain.yaml``.
Docs: docs/jobs/bridge-drain.md.
"""
