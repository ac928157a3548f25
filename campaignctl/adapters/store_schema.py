"""The Core tables queries use, as the migrations (adapters/store_migrations.py) leave them."""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()
campaigns = sa.Table(
    "campaigns", metadata,
    sa.Column("id", sa.Integer, primary_key=True), sa.Column("name", sa.Text),
    sa.Column("state", sa.Text), sa.Column("current_revision", sa.Integer),
    sa.Column("run_dir", sa.Text), sa.Column("owner", sa.Text), sa.Column("created_at", sa.Text))
revisions = sa.Table(
    "revisions", metadata,
    sa.Column("id", sa.Integer, primary_key=True), sa.Column("campaign_id", sa.Integer),
    sa.Column("number", sa.Integer), sa.Column("spec_text", sa.Text),
    sa.Column("spec_hash", sa.Text), sa.Column("spec_path", sa.Text), sa.Column("author", sa.Text),
    sa.Column("reason", sa.Text), sa.Column("created_at", sa.Text), sa.Column("policy_json", sa.Text),
    sa.Column("settings_json", sa.Text), sa.Column("kind", sa.Text),
    sa.Column("shadow_policy_json", sa.Text), sa.Column("source_revision", sa.Integer))
tasks = sa.Table(
    "tasks", metadata,
    sa.Column("id", sa.Integer, primary_key=True), sa.Column("campaign_id", sa.Integer),
    sa.Column("task_index", sa.Integer), sa.Column("params_json", sa.Text),
    sa.Column("argv_json", sa.Text), sa.Column("env_json", sa.Text))
submissions = sa.Table(
    "submissions", metadata,
    sa.Column("id", sa.Integer, primary_key=True), sa.Column("campaign_id", sa.Integer),
    sa.Column("revision", sa.Integer), sa.Column("token", sa.Text), sa.Column("state", sa.Text),
    sa.Column("job_id", sa.Text), sa.Column("array_spec", sa.Text), sa.Column("size", sa.Integer),
    sa.Column("folder", sa.Text), sa.Column("resources_json", sa.Text),
    sa.Column("created_at", sa.Text), sa.Column("updated_at", sa.Text), sa.Column("requeue", sa.Integer),
    sa.Column("kind", sa.Text), sa.Column("tries", sa.Integer), sa.Column("last_error", sa.Text),
    sa.Column("next_try_at", sa.Text), sa.Column("submitted_by", sa.Text), sa.Column("pack", sa.Text),
    sa.Column("cluster", sa.Text))
attempts = sa.Table(
    "attempts", metadata,
    sa.Column("id", sa.Integer, primary_key=True), sa.Column("task_id", sa.Integer),
    sa.Column("submission_id", sa.Integer), sa.Column("attempt_number", sa.Integer),
    sa.Column("array_index", sa.Integer), sa.Column("token", sa.Text), sa.Column("job_id", sa.Text),
    sa.Column("state", sa.Text), sa.Column("created_at", sa.Text), sa.Column("slurm_state", sa.Text),
    sa.Column("exit_code", sa.Integer), sa.Column("nodes", sa.Text), sa.Column("elapsed_s", sa.Integer),
    sa.Column("max_rss", sa.Text), sa.Column("ended_at", sa.Text), sa.Column("missing_since", sa.Text),
    sa.Column("resources_json", sa.Text), sa.Column("alloc_tres", sa.Text), sa.Column("cause", sa.Text),
    sa.Column("evidence", sa.Text), sa.Column("params_json", sa.Text),
    sa.Column("consumed_energy_j", sa.BigInteger), sa.Column("gpu_energy_j", sa.Double))
ticks = sa.Table(
    "ticks", metadata,
    sa.Column("id", sa.Integer, primary_key=True), sa.Column("started_at", sa.Text),
    sa.Column("finished_at", sa.Text), sa.Column("status", sa.Text), sa.Column("scope", sa.Text),
    sa.Column("slurm_calls", sa.Integer), sa.Column("decisions", sa.Integer), sa.Column("note", sa.Text),
    sa.Column("clock", sa.Text))
decisions = sa.Table(
    "decisions", metadata,
    sa.Column("id", sa.Integer, primary_key=True), sa.Column("tick_id", sa.Integer),
    sa.Column("campaign_id", sa.Integer), sa.Column("task_index", sa.Integer),
    sa.Column("attempt_token", sa.Text), sa.Column("policy", sa.Text), sa.Column("policy_digest", sa.Text),
    sa.Column("rule", sa.Text), sa.Column("action", sa.Text), sa.Column("params_json", sa.Text),
    sa.Column("inputs_json", sa.Text), sa.Column("reason", sa.Text), sa.Column("mode", sa.Text),
    sa.Column("group_token", sa.Text), sa.Column("created_at", sa.Text), sa.Column("revision", sa.Integer),
    sa.Column("gate", sa.Text), sa.Column("prev_hash", sa.Text), sa.Column("row_hash", sa.Text))
decision_outcomes = sa.Table(
    "decision_outcomes", metadata,
    sa.Column("id", sa.Integer, primary_key=True), sa.Column("decision_id", sa.Integer),
    sa.Column("status", sa.Text), sa.Column("detail_json", sa.Text), sa.Column("error", sa.Text),
    sa.Column("created_at", sa.Text), sa.Column("prev_hash", sa.Text), sa.Column("row_hash", sa.Text))
observations = sa.Table(
    "observations", metadata,
    sa.Column("id", sa.Integer, primary_key=True), sa.Column("attempt_id", sa.Integer),
    sa.Column("tick_id", sa.Integer), sa.Column("state", sa.Text), sa.Column("slurm_state", sa.Text),
    sa.Column("exit_code", sa.Integer), sa.Column("nodes", sa.Text), sa.Column("elapsed_s", sa.Integer),
    sa.Column("observed_at", sa.Text), sa.Column("max_rss", sa.Text), sa.Column("ended_at", sa.Text),
    sa.Column("missing_since", sa.Text))
leases = sa.Table(
    "leases", metadata,
    sa.Column("campaign_id", sa.BigInteger, primary_key=True), sa.Column("holder", sa.Text),
    sa.Column("host", sa.Text), sa.Column("pid", sa.BigInteger), sa.Column("token", sa.Text),
    sa.Column("acquired_at", sa.Double), sa.Column("expires_at", sa.Double), sa.Column("pid_ns", sa.Text))
telemetry = sa.Table(
    "telemetry", metadata,
    sa.Column("attempt_id", sa.BigInteger, primary_key=True), sa.Column("inode", sa.BigInteger),
    sa.Column("file_offset", sa.BigInteger), sa.Column("summary_json", sa.Text), sa.Column("updated_at", sa.Text),
    sa.Column("behind", sa.Integer))
metric_reads = sa.Table(
    "metric_reads", metadata,
    sa.Column("attempt_id", sa.BigInteger, primary_key=True), sa.Column("inode", sa.BigInteger),
    sa.Column("file_offset", sa.BigInteger), sa.Column("bad_lines", sa.Integer), sa.Column("updated_at", sa.Text),
    sa.Column("behind", sa.Integer))
metrics = sa.Table(
    "metrics", metadata,
    sa.Column("id", sa.Integer, primary_key=True), sa.Column("attempt_id", sa.Integer),
    sa.Column("step", sa.BigInteger), sa.Column("name", sa.Text), sa.Column("value", sa.Double),
    sa.Column("t", sa.Double))
node_marks = sa.Table(
    "node_marks", metadata,
    sa.Column("id", sa.Integer, primary_key=True), sa.Column("cluster", sa.Text), sa.Column("node", sa.Text),
    sa.Column("at", sa.Text), sa.Column("kind", sa.Text), sa.Column("weight", sa.Double),
    sa.Column("campaign_id", sa.BigInteger), sa.Column("decision_id", sa.BigInteger),
    sa.Column("user_name", sa.Text), sa.Column("reason", sa.Text))
notifications = sa.Table(
    "notifications", metadata,
    sa.Column("id", sa.Integer, primary_key=True), sa.Column("campaign_id", sa.BigInteger),
    sa.Column("event_key", sa.Text), sa.Column("channel", sa.Text), sa.Column("event_json", sa.Text),
    sa.Column("status", sa.Text), sa.Column("tries", sa.Integer), sa.Column("last_error", sa.Text),
    sa.Column("created_at", sa.Text), sa.Column("sent_at", sa.Text), sa.Column("next_try_at", sa.Text))
tick_failures = sa.Table(
    "tick_failures", metadata,
    sa.Column("id", sa.Integer, primary_key=True), sa.Column("tick_id", sa.BigInteger),
    sa.Column("campaign_id", sa.BigInteger), sa.Column("failed_at", sa.Text), sa.Column("error", sa.Text))
