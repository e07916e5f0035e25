"""retrieval-eval: the eval suite run, compared with the baseline, exit 1 on a regression (the
deploy gate).

- `job`: the job's ``run(ctx)``; suites, metrics, baselines, history and the recall engines are the
  shared ``mnemo_ops.evaluation`` service, which the recall guard measures with too.

Options: the ``retrieval_eval`` section. Manifest: ``jobs/retrieval-eval.yaml``.
Docs: docs/jobs/retrieval-eval.md.
"""
