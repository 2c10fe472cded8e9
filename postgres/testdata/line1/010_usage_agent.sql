-- Who in the agent spent each event: '' for the main agent, else the
-- sub-agent its CLI named (Claude Code's parent_tool_use_id).
ALTER TABLE usage ADD COLUMN agent TEXT NOT NULL DEFAULT '';
