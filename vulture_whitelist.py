# ruff: noqa
"""Names vulture reports as unused in mnemo_ops/ although they are used (vulture's whitelist format).

Check: ``vulture mnemo_ops vulture_whitelist.py --min-confidence 60`` reports nothing. Vulture only
parses this file, it is never imported. A name listed here is whitelisted everywhere in the
package, so add a name only after a grep across mnemo_ops/, tests/, benchmarks/ and docs/ shows the
use vulture cannot see, under the group that says why ([docs/development.md](docs/development.md)).
"""

# apsw calls the methods of a virtual file system and of its files by name (the chunk store's
# VFS); the arguments SQLite passes must be accepted even when the method ignores them.
_.xOpen
_.xAccess
_.xDelete
_.xFullPathname
_.xRead
_.xWrite
_.xTruncate
_.xFileSize
_.xSync
_.xLock
_.xUnlock
_.xCheckReservedLock
_.xFileControl
_.xSectorSize
_.xDeviceCharacteristics
_.xClose
op
pointer
pathname
syncdir

# Callbacks whose signature is fixed by their caller: signal handlers (signum, frame) and apsw's
# WAL hook (the database name).
signum
frame
database_name

# typer registers the command functions through its decorators; cli.main_options is the
# application's callback; cli's group class overrides click's format_commands.
main_options
_.format_commands
list_command
verify_command
capture_command
schema_command
show_command
render_command
install_command
uninstall_command
status_command
demo_command
doctor_command
run_command
baseline_command
compare_command
import_command
explain_command
jobs_command
report_command
revert_command
topics_command
why_command

# rich's Console calls on_broken_pipe when stdout's reader goes away.
_.on_broken_pipe

# pydantic reads model_config and runs the validators it was given by decorator.
model_config
_._costly_option_is_a_switch
_._compiles
_._water_marks
_._prominence_band

# Docstrings set at run time (a state-dir path descriptor, the generated jobs model), read by
# help() and by the config schema.
_.__doc__

# Attributes of Mnemosyne's modules replaced in the consolidation child, read by Mnemosyne.
_._llm_available
_._deduplicate_memoria_cross_session

# The sqlite3 connection reads row_factory.
_.row_factory

# An enum member reached by value (a finding's severity is written as the string "critical").
CRITICAL

# Dataclass fields read through dataclasses.asdict or getattr: the linking totals, the model
# layer's figures, the contradiction journal, the sample profile, the reflection's assessment.
orphans_linked
orphans_unmatched
orphans_matched_later
orphans_linked_meanwhile
prompts
retries
malformed
skipped_budget
withheld_private
withheld_too_long
redactions
older_value
newer_value
tokens_per_document
hapax_share
top_term_share
user_share
top10_mean_share
same_session_overlap
cross_session_overlap
went_well
went_badly
do_differently

# Fields of the Mnemosyne lines that .ci/run reads (the pip specifier, the Hermes plugin).
requirement
agent_plugin

# The question writers of the Hermes conversation home, called by category name through getattr.
_.multi_hop
_.preference
_.knowledge_update

# Used by tests/ and benchmarks/ only, as the package's public helpers: the sample homes and their
# generators (devtools.samples exists for the tests, the demo and the benchmarks), the test
# model plugin's reset, and the plain write transaction the tests and a benchmark hold.
build
as_agent_sessions
copy_home
add_synthetic_memories
generate_rows
sample_documents
generated_documents
cached_realistic_home
CATEGORIES
BENCHMARK_SIZE
EXPECTED_KINDS
EXPECTED_SLOTS
forget_process_answers
immediate_transaction

# CompactionResult.removed_files (checkpoints/compaction.py) is read nowhere yet: it keeps the pair
# catalog.collect_chunks returns (files, bytes) whole.
removed_files
