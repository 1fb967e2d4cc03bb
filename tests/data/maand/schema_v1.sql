-- maand-sh/maand data/schema.go @ 3f8043e0fc00855ce4705ed290e3754567b6160b (MIT licence): baseTableDDL, migrateToV1 schema_version,
-- recreateCatalogViews, ensureCatDeploymentsView; then INSERT of version 1 as writeSchemaVersion does.
CREATE TABLE IF NOT EXISTS bucket (bucket_id TEXT, update_seq INT);
CREATE TABLE IF NOT EXISTS worker (
			worker_id TEXT,
			worker_ip TEXT,
			available_memory_mb TEXT,
			available_cpu_mhz TEXT,
			position INT,
			PRIMARY KEY(worker_ip)
		);
CREATE TABLE IF NOT EXISTS worker_labels (worker_id TEXT, label TEXT);
CREATE TABLE IF NOT EXISTS worker_tags (worker_id TEXT, key TEXT, value TEXT);
CREATE TABLE IF NOT EXISTS allocations (
			alloc_id TEXT,
			worker_ip TEXT,
			job TEXT,
			disabled INT,
			removed INT,
			deployment_seq INT,
			new_version TEXT,
			PRIMARY KEY(worker_ip, job)
		);
CREATE TABLE IF NOT EXISTS job (
			job_id TEXT,
			name TEXT,
			version TEXT,
			min_memory_mb TEXT,
			max_memory_mb TEXT,
			current_memory_mb TEXT,
			current_memory_source TEXT NOT NULL DEFAULT 'manifest',
			min_cpu_mhz TEXT,
			max_cpu_mhz TEXT,
			current_cpu_mhz TEXT,
			current_cpu_source TEXT NOT NULL DEFAULT 'manifest',
			max_concurrent_upgrades INT NOT NULL DEFAULT 1,
			max_concurrent_starts INT NOT NULL DEFAULT 0,
			restart_policy TEXT NOT NULL DEFAULT 'always',
			restart_globs TEXT NOT NULL DEFAULT '[]',
			health_check TEXT,
			PRIMARY KEY(name)
		);
CREATE TABLE IF NOT EXISTS job_selectors (job_id TEXT, selector TEXT);
CREATE TABLE IF NOT EXISTS job_ports (job_id TEXT, name TEXT, port INT);
CREATE TABLE IF NOT EXISTS job_certs (job_id TEXT, name TEXT, pkcs8 INT, one INT, subject TEXT);
CREATE TABLE IF NOT EXISTS job_files (job_id TEXT, path TEXT, content BLOB, isdir BOOL);
CREATE TABLE IF NOT EXISTS job_commands (
			job_id TEXT,
			job TEXT,
			name TEXT,
			executed_on TEXT,
			demand_job TEXT,
			demand_command TEXT,
			demand_config TEXT
		);
CREATE TABLE IF NOT EXISTS key_value (
			key TEXT,
			value TEXT,
			namespace TEXT,
			version INT,
			ttl TEXT,
			created_date TEXT,
			deleted INT
		);
CREATE TABLE IF NOT EXISTS hash (
			namespace TEXT,
			key TEXT,
			current_hash TEXT,
			previous_hash TEXT,
			current_files TEXT,
			previous_files TEXT,
			current_version TEXT,
			PRIMARY KEY(namespace, key)
		);
CREATE TABLE IF NOT EXISTS schema_version (
			id INTEGER PRIMARY KEY CHECK (id = 1),
			version INTEGER NOT NULL
		);
DROP VIEW IF EXISTS cat_allocations;
DROP VIEW IF EXISTS cat_jobs;
DROP VIEW IF EXISTS cat_job_commands;
DROP VIEW IF EXISTS cat_kv;
DROP VIEW IF EXISTS cat_workers;
CREATE VIEW cat_allocations (alloc_id, worker_ip, job, disabled, removed, new_version, zone) AS
			SELECT a.alloc_id, a.worker_ip, a.job, a.disabled, a.removed, a.new_version,
				(SELECT wt.value FROM worker_tags wt
				 JOIN worker w ON w.worker_id = wt.worker_id
				 WHERE w.worker_ip = a.worker_ip AND wt.key = 'zone') AS zone
			FROM allocations a ORDER BY job;
CREATE VIEW cat_jobs (job_id, name, version, disabled, deployment_seq, selectors, current_memory_mb, current_memory_source, current_cpu_mhz, current_cpu_source) AS
			SELECT DISTINCT job_id, name, version,
				(CASE WHEN (SELECT COUNT(1) FROM allocations wj WHERE j.name = wj.job AND wj.disabled = 0) > 0 THEN 0 ELSE 1 END) AS disabled,
				ifnull((SELECT DISTINCT deployment_seq FROM allocations wj WHERE wj.job = j.name), 0) AS deployment_seq,
				ifnull((SELECT GROUP_CONCAT(selector) FROM job_selectors jl WHERE jl.job_id = j.job_id), '') as selectors,
				j.current_memory_mb, j.current_memory_source,
				j.current_cpu_mhz, j.current_cpu_source
			FROM job j ORDER BY deployment_seq, name;
CREATE VIEW cat_job_commands (job, command_name, executed_on, demand_job, demand_command, demand_config) AS
			SELECT job, name as command_name, executed_on, demand_job, demand_command, demand_config FROM job_commands ORDER BY job, name;
CREATE VIEW cat_kv (namespace, key, value, version, ttl, created_date, deleted) AS
			SELECT * FROM (
				SELECT namespace, key,
					(CASE
						WHEN value LIKE 'enc:v1:%' THEN '[encrypted]'
						WHEN LENGTH(value) > 50 THEN substr(value, 1, 50) || '...'
						ELSE value
					END) as value,
					max(version) as version, ttl, created_date, deleted
				FROM key_value GROUP BY namespace, key
			) t ORDER BY namespace, key;
CREATE VIEW cat_workers (worker_id, worker_ip, available_memory_mb, available_cpu_mhz, position, labels, zone) AS
			SELECT w.worker_id, w.worker_ip, w.available_memory_mb, w.available_cpu_mhz, w.position,
				(SELECT group_concat(label) AS labels FROM worker_labels WHERE worker_id = w.worker_id) AS labels,
				(SELECT wt.value FROM worker_tags wt WHERE wt.worker_id = w.worker_id AND wt.key = 'zone') AS zone
			FROM worker w ORDER BY position;
DROP VIEW IF EXISTS cat_hashes;
DROP VIEW IF EXISTS cat_deployments;
CREATE VIEW cat_deployments (
			alloc_id, worker_ip, job, disabled, removed,
			current_hash, previous_hash, current_version, new_version
		) AS
			SELECT a.alloc_id, a.worker_ip, a.job, a.disabled, a.removed,
			       ifnull(h.current_hash, ''), ifnull(h.previous_hash, ''),
			       ifnull(h.current_version, ''), ifnull(a.new_version, '')
			FROM allocations a
			LEFT JOIN hash h ON h.namespace = (a.job || '_allocation') AND h.key = a.alloc_id
			ORDER BY a.job, a.worker_ip;
INSERT INTO schema_version (id, version) VALUES (1, 1);
