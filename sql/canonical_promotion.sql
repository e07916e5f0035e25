-- mnemo-ops canonical promotion trigger, version __VERSION__.
--
-- Installed by `mnemo-ops trigger install` (which replaces __OWNER__ with the owner fixed at install
-- as an SQL string literal, __OWNER_HEX__ with its hex form for `trigger status`, and __VERSION__).
-- These triggers run inside Mnemosyne's own connections (Python's sqlite3, SQLite 3.40 on the
-- target machines), so they use only SQL that SQLite 3.37 understands.
--
-- Rules (the backstop sweep in mnemo_ops/jobs/memory_maintain/job.py applies the same ones):
--   qualifies  source IN ('user','fact'), veracity 'stated', importance >= 0.7, non-blank content,
--              non-NULL id
--   live       superseded_by IS NULL and (valid_until IS NULL or valid_until > now), where now is
--              the local ISO time, the format Mnemosyne writes (datetime.now().isoformat())
--   lineage    canonical_facts rows with owner_id = owner and source = 'auto:<working id>';
--              slot (owner, 'auto:<memory_type>', '<working id>'); body = content,
--              confidence = importance; versions climb by 1 over the lineage
--   promote    a live qualifying row without a current lineage row gets one
--   close      the current lineage row gets valid_until = now when its working row is deleted,
--              closed, superseded, or its content changes (then a qualifying row is promoted again
--              as version + 1)
--
-- Never make one of Mnemosyne's writes fail: every statement is guarded so it cannot violate a
-- constraint (NOT NULL columns get non-NULL values; the partial unique index on current slots is
-- checked with NOT EXISTS rather than left to a conflict, so an outer INSERT OR REPLACE could not
-- turn it into a DELETE either).

CREATE INDEX IF NOT EXISTS mnemo_ops_canonical_lineage ON canonical_facts(source, owner_id);

CREATE TRIGGER mnemo_ops_canonical_ai AFTER INSERT ON working_memory
WHEN NEW.id IS NOT NULL
  AND NEW.source IN ('user', 'fact') AND NEW.veracity = 'stated' AND NEW.importance >= 0.7
  AND trim(NEW.content) <> ''
  AND NEW.superseded_by IS NULL
  AND (NEW.valid_until IS NULL OR NEW.valid_until > strftime('%Y-%m-%dT%H:%M:%f', 'now', 'localtime'))
BEGIN
  -- mnemo-ops:canonical-promotion version=__VERSION__ owner_hex=__OWNER_HEX__
  INSERT INTO canonical_facts (owner_id, category, name, body, source, confidence, version, valid_from, valid_until)
  SELECT __OWNER__, 'auto:' || coalesce(nullif(NEW.memory_type, ''), 'unknown'), NEW.id, NEW.content,
         'auto:' || NEW.id, NEW.importance,
         coalesce((SELECT max(version) FROM canonical_facts
                   WHERE source = 'auto:' || NEW.id AND owner_id = __OWNER__), 0) + 1,
         strftime('%Y-%m-%dT%H:%M:%S', 'now', 'localtime'), NULL
  WHERE NOT EXISTS (SELECT 1 FROM canonical_facts
                    WHERE source = 'auto:' || NEW.id AND owner_id = __OWNER__ AND valid_until IS NULL)
    AND NOT EXISTS (SELECT 1 FROM canonical_facts
                    WHERE owner_id = __OWNER__ AND category = 'auto:' || coalesce(nullif(NEW.memory_type, ''), 'unknown')
                      AND name = NEW.id AND valid_until IS NULL);
END;

CREATE TRIGGER mnemo_ops_canonical_au
AFTER UPDATE OF id, content, source, veracity, importance, valid_until, superseded_by ON working_memory
BEGIN
  -- mnemo-ops:canonical-promotion version=__VERSION__ owner_hex=__OWNER_HEX__
  -- Close the old row's current lineage row when the row is closed or superseded, its content
  -- no longer matches the body, or its id changed.
  UPDATE canonical_facts SET valid_until = strftime('%Y-%m-%dT%H:%M:%S', 'now', 'localtime')
  WHERE source = 'auto:' || OLD.id AND owner_id = __OWNER__ AND valid_until IS NULL
    AND (NEW.id IS NOT OLD.id OR body IS NOT NEW.content OR NEW.superseded_by IS NOT NULL
         OR coalesce(NEW.valid_until <= strftime('%Y-%m-%dT%H:%M:%f', 'now', 'localtime'), 0));
  -- Promote the row (again) when it is live, qualifies, and has no current lineage row.
  INSERT INTO canonical_facts (owner_id, category, name, body, source, confidence, version, valid_from, valid_until)
  SELECT __OWNER__, 'auto:' || coalesce(nullif(NEW.memory_type, ''), 'unknown'), NEW.id, NEW.content,
         'auto:' || NEW.id, NEW.importance,
         coalesce((SELECT max(version) FROM canonical_facts
                   WHERE source = 'auto:' || NEW.id AND owner_id = __OWNER__), 0) + 1,
         strftime('%Y-%m-%dT%H:%M:%S', 'now', 'localtime'), NULL
  WHERE NEW.id IS NOT NULL
    AND NEW.source IN ('user', 'fact') AND NEW.veracity = 'stated' AND NEW.importance >= 0.7
    AND trim(NEW.content) <> ''
    AND NEW.superseded_by IS NULL
    AND (NEW.valid_until IS NULL OR NEW.valid_until > strftime('%Y-%m-%dT%H:%M:%f', 'now', 'localtime'))
    AND NOT EXISTS (SELECT 1 FROM canonical_facts
                    WHERE source = 'auto:' || NEW.id AND owner_id = __OWNER__ AND valid_until IS NULL)
    AND NOT EXISTS (SELECT 1 FROM canonical_facts
                    WHERE owner_id = __OWNER__ AND category = 'auto:' || coalesce(nullif(NEW.memory_type, ''), 'unknown')
                      AND name = NEW.id AND valid_until IS NULL);
END;

CREATE TRIGGER mnemo_ops_canonical_ad AFTER DELETE ON working_memory
BEGIN
  -- mnemo-ops:canonical-promotion version=__VERSION__ owner_hex=__OWNER_HEX__
  UPDATE canonical_facts SET valid_until = strftime('%Y-%m-%dT%H:%M:%S', 'now', 'localtime')
  WHERE source = 'auto:' || OLD.id AND owner_id = __OWNER__ AND valid_until IS NULL;
END;
