"""What the Hermes cron tests share: a jobs.json someone else wrote."""

# A jobs.json as a person or another tool may have left it: Hermes' layout, a unicode prompt, an
# entry written compactly, a stray non-object, keys Hermes does not know.
FOREIGN = """{
  "jobs": [
    {
      "id": "abcdef012345",
      "name": "morning brief",
      "prompt": "Summarise my inbox \u2014 caf\u00e9 \u00fcber alles",
      "schedule": {"kind": "cron", "expr": "0 8 * * *", "display": "0 8 * * *"},
      "deliver": "telegram:42",
      "custom_field": [1, 2.50, {"nested": true}]
    },
    {"id": "0123456789ab", "name": "tidy", "no_agent": true, "script": "tidy.sh",   "schedule":
      {"kind": "interval", "minutes": 30}},
    "a stray string someone left here"
  ],
  "updated_at": "2026-11-01T08:00:00+00:00"
}
"""
