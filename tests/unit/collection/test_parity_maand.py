"""maand's own build tests (maand-sh/maand tests/*_test.go, build/*_test.go, workspace/*_test.go) as a
data-driven table: each case rebuilds the fixture the Go test writes on top of a `maand init` bucket and
checks the outcome the Go test asserts (OK, or the error kind it asserts with assert.ErrorIs).

Rows of tests/*_test.go build through maand's test harness (tests/maand_init.py harness_labels); rows of the
build/ package tests write as workspace files the SQLite rows those tests seed.

Each row cites its Go test. maand stops at its first error; maand.core reports every error, so a row
checks that maand's error kind is among ours and, where the Go test checks wording, that maand's words
appear inside ours.
"""

import os

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from ansible_collections.maand.core.plugins.plugin_utils.bucket.units import parse_version
from tests.bucket_factory import write
from tests.maand_init import harness_labels, init_bucket, job, ws


def no_workers_json(root):
    os.remove(os.path.join(str(root), "workspace", "workers.json"))


def workers(text):
    return lambda root: ws(root, "workers.json", text)


def steps(*functions):
    def run(root):
        for function in functions:
            function(root)
    return run


def job_a(manifest, makefile="", modules=()):
    return lambda root: job(root, "a", manifest, makefile, modules)


ONE_WORKER = workers('[{"host":"10.0.0.1"}]')


def base_job(name, command, version):
    """tests/build_demand_validation_test.go writeBaseJob, byte for byte."""
    field = '"version":"%s",' % version if version else ""
    return lambda root: job(root, name, '{"selectors":["worker"],%s"commands":{"%s":{"executed_on":["cli"]}}}' % (
        field, command), modules=[command + ".py"])


def demand_job(name, demand, command, version, extra=""):
    """tests/build_demand_validation_test.go writeDemandJob, byte for byte."""
    field = '"version":"%s",' % version if version else ""
    return lambda root: job(root, name, '{"selectors":["worker"],%s"commands":{"command_dep":{"executed_on":["cli"],'
                            '"demands":{"job":"%s","command":"%s"%s}}}}' % (field, demand, command, extra),
                            modules=["command_dep.py"])


def jobs(*specs):
    """Jobs of maand's build/ package tests: (name, manifest text, command scripts under _modules/), empty Makefile."""
    return lambda root: [job(root, name, manifest, modules=scripts) for name, manifest, *rest in specs
                         for scripts in [rest[0] if rest else ()]]


def app_on_one_worker(worker, manifest):
    """build/validate_test.go's rows (worker, job app, allocation app@10.0.0.1) as a workspace: the worker
    carries the label app, so the job (no selectors) is placed there."""
    return steps(workers('[%s]' % worker), job_a_named("app", manifest))


def job_a_named(name, manifest):
    return lambda root: job(root, name, manifest)


# build/validate_demands_test.go's jobs (writeDemandValidationJob), with the _modules/<command>.py a whole build needs
DV_DB_SCHEMA = ("db", '{\n\t\t"selectors":["db"],\n\t\t"version":"2.1.0",\n\t\t"commands":{"command_schema":{"executed_on":'
                '["cli"]}}\n\t}', ["command_schema.py"])


def dv_api(demand, config=""):
    return ("api", '{\n\t\t"selectors":["web"],\n\t\t"version":"1.0.0",\n\t\t"commands":{"command_migrate":{"executed_on":'
                   '["cli"],"demands":{"job":"%s","command":"command_schema"%s}}}\n\t}' % (demand, config), ["command_migrate.py"])


# build/execute_test.go writeMinimalBuildWorkspace
EXEC_WORKERS = workers('[{"host":"10.0.0.1","labels":["web"],"memory":"1024","cpu":"2000","position":0}]')
EXEC_API = ('{\n\t\t"version": "1.0.0",\n\t\t"selectors": ["web"],\n\t\t"resources": {\n\t\t\t"memory": {"min": "128", '
            '"max": "256"},\n\t\t\t"cpu": {"min": "100", "max": "200"}\n\t\t}\n\t}')
EXEC_MINIMAL = steps(EXEC_WORKERS, job_a_named("api", EXEC_API))


def seq_job(name, command, demand=None, version="1.0.0"):
    """A job of build/build_deployment_sequence_test.go's job_commands rows: command, optional demand (job, command)."""
    demands = ',"demands":{"job":"%s","command":"%s"}' % demand if demand else ""
    return (name, '{"version":"%s","selectors":["worker"],"commands":{"%s":{"executed_on":["cli"]%s}}}' % (
        version, command, demands), [command + ".py"])


# (id, maand test, setup, expected error kind or None for OK, words maand's test asserts in the message)
CASES = [
    ("init_bucket_builds", "tests/init_test.go (ssh_port = 0 from init)", lambda root: None, None, None),
    ("Build1_no_workers_json", "tests/build_test.go TestBuild1", no_workers_json, None, None),
    ("Build2_empty_file", "tests/build_test.go TestBuild2", workers(""), "ErrInvalidWorkerJSON", None),
    ("Build3_empty_list", "tests/build_test.go TestBuild3", workers("[]"), None, None),
    ("Build4_no_host", "tests/build_test.go TestBuild4", workers("[{}]"), "ErrInvalidWorkerJSON", None),
    ("Build5_object", "tests/build_test.go TestBuild5", workers("{}"), "ErrInvalidWorkerJSON", None),
    ("Build6_duplicate_host", "tests/build_test.go TestBuild6",
     workers('[{"host":"10.0.0.1"},{"host":"10.0.0.1"}]'), "ErrInvalidWorkerJSON", None),
    ("Build7_label_not_string", "tests/build_test.go TestBuild7",
     workers('[{"host":"10.0.0.1","labels":[1]}]'), "ErrInvalidWorkerJSON", None),
    ("Build8_one_host", "tests/build_test.go TestBuild8", ONE_WORKER, None, None),
    ("blank_host", "workspace/workspace.go GetWorkers (host attribute can't be empty)",
     workers('[{"host":"  "}]'), "ErrInvalidWorkerJSON", None),
    ("trimmed_duplicate_host", "workspace/workspace.go GetWorkers (duplicate host after TrimSpace)",
     workers('[{"host":"10.0.0.1"},{"host":" 10.0.0.1"}]'), "ErrInvalidWorkerJSON", "duplicate host"),
    ("WorkerLabelsDuplicated", "tests/build_worker_label_test.go TestWorkerLabelsDuplicated",
     workers('[{ "host": "10.0.0.1", "labels": ["a", "a"] }]'), "ErrInvalidWorkerJSON", "have duplicate labels"),
    ("rejectsDuplicateLabels", "build/build_jobs_test.go TestBuildWorkers_rejectsDuplicateLabels",
     workers('[{"host":"10.0.0.1","labels":["web","web"],"memory":"1024","cpu":"2000","position":0}]'),
     "ErrInvalidWorkerJSON", "duplicate labels"),
    ("WorkerJSONDuplicateWorker", "tests/build_worker_json_test.go TestWorkerJSONDuplicateWorker",
     workers('[{"host":"10.0.0.1"},{"host":"10.0.0.2"},{"host":"10.0.0.1"}]'), "ErrInvalidWorkerJSON", None),
    ("WorkerJSONInvalid", "tests/build_worker_json_test.go TestWorkerJSONInvalid",
     workers('[{"host":"10.0.0.1"'), "ErrInvalidWorkerJSON", None),
    ("WorkerResourcesInvalid_memory", "tests/build_worker_resources_test.go TestWorkerResourcesInvalid",
     workers('[{"host":"10.0.0.1","memory":"abc"}]'), "ErrInvalidWorkerJSON", None),
    ("WorkerResourcesInvalid_cpu", "tests/build_worker_resources_test.go TestWorkerResourcesInvalid",
     workers('[{"host":"10.0.0.1","cpu":"abc"}]'), "ErrInvalidWorkerJSON", None),
    ("JobWithoutManifest", "tests/build_job_test.go TestJobWithoutManifest",
     lambda root: os.makedirs(os.path.join(str(root), "workspace", "jobs", "a")), None, None),
    ("JobConfInvalid", "tests/build_job_test.go TestJobConfInvalid",
     steps(job_a('{"version":"1.1"}'), lambda root: ws(root, "bucket.jobs.conf", "\n[a]\ntest=1\n")),
     "ErrInvalidBucketConf", None),
    ("JobConf_strings", "tests/build_job_test.go TestJobConf",
     steps(job_a('{"version":"1.1"}'), lambda root: ws(root, "bucket.jobs.conf", '\n[a]\ntest="1"\nvar="1"\n')),
     None, None),
    ("MakefileNotFound", "tests/build_bucket_test.go TestMakefileNotFound",
     job_a("{}", makefile=None), "ErrInvalidJob", "Makefile or Makefile.tpl not found"),
    ("InvalidmanifestJSON", "tests/build_bucket_test.go TestInvalidmanifestJSON",
     job_a("{"), "ErrInvalidManifest", "invalid manifest.json: job a: unexpected end of JSON input"),
    ("acceptsMakefileTemplate", "build/build_jobs_test.go TestBuildJobs_acceptsMakefileTemplate",
     lambda root: (job(root, "a", "{}", makefile=None), ws(root, "jobs/a/Makefile.tpl", "start:\n")), None, None),
    ("Reserved_data", "tests/build_reserved_dirs_test.go TestBuildFailsWhenJobHasReservedDataDirectory",
     steps(job_a("{}"), lambda root: os.makedirs(os.path.join(str(root), "workspace/jobs/a/data"))),
     "ErrInvalidJob", "data directory is reserved"),
    ("Reserved_logs", "tests/build_reserved_dirs_test.go TestBuildFailsWhenJobHasReservedLogsDirectory",
     steps(job_a("{}"), lambda root: os.makedirs(os.path.join(str(root), "workspace/jobs/a/logs"))),
     "ErrInvalidJob", "logs directory is reserved"),
    ("Reserved_bin", "tests/build_reserved_dirs_test.go TestBuildFailsWhenJobHasReservedBinDirectory",
     steps(job_a("{}"), lambda root: os.makedirs(os.path.join(str(root), "workspace/jobs/a/bin"))),
     "ErrInvalidJob", "bin directory is reserved"),
    ("JobCommandWithoutTrigger", "tests/build_job_command_test.go TestJobCommandWithoutTrigger",
     job_a('{"commands":{"command_health_check":{}}}', modules=["command_health_check.py"]),
     "ErrInvalidJobCommandConfiguration", "missing executed_on"),
    ("JobCommandBuildWithTrigger", "tests/build_job_command_test.go TestJobCommandBuildWithTrigger",
     job_a('{"commands":{"command_health_check":{"executed_on":["post_build", "pre_deploy"]}}}',
           modules=["command_health_check.py"]), None, None),
    ("JobCommandFileMissing", "tests/build_job_command_test.go TestJobCommandFileMissing",
     job_a('{"commands":{"command_health_check":{"executed_on":["post_build"]}}}'),
     "ErrJobCommandFileNotFound", "expected command_health_check.py, command_health_check.ts, or command_health_check.js"),
    ("JobCommandPrefixFormat", "tests/build_job_command_test.go TestJobCommandPrefixFormat",
     job_a('{"commands":{"1command_health_check1":{"executed_on":["post_build"]}}}',
           modules=["1command_health_check1.py"]), "ErrInvalidJobCommandConfiguration", None),
    ("acceptsAllocationHookEvents", "build/build_jobs_test.go TestBuildJobs_acceptsAllocationHookEvents",
     job_a('{"commands":{"command_hook":{"executed_on":["after_allocation_started","after_allocation_stopped"]}}}',
           modules=["command_hook.py"]), None, None),
    ("BunTypeScript", "tests/build_job_command_bun_test.go TestJobCommandBunTypeScript",
     steps(ONE_WORKER, job_a('{"selectors":["worker"],"commands":{"command_health_check":{"executed_on":["cli"],'
                             '"demands":{"job":"","command":""}}}}', modules=["command_health_check.ts"])), None, None),
    ("BunJavaScript", "tests/build_job_command_bun_test.go TestJobCommandBunJavaScript",
     steps(ONE_WORKER, job_a('{"selectors":["worker"],"commands":{"command_health_check":{"executed_on":["cli"]}}}',
                             modules=["command_health_check.js"])), None, None),
    ("BunAndPythonConflict", "tests/build_job_command_bun_test.go TestJobCommandBunAndPythonConflict",
     steps(ONE_WORKER, job_a('{"selectors":["worker"],"commands":{"command_health_check":{"executed_on":["cli"]}}}',
                             modules=["command_health_check.py", "command_health_check.ts"])),
     "ErrInvalidJobCommandConfiguration", "multiple implementations for command_health_check"),
    ("BunPythonAndJSConflict", "tests/build_job_command_bun_test.go TestJobCommandBunPythonAndJSConflict",
     steps(ONE_WORKER, job_a('{"selectors":["worker"],"commands":{"command_health_check":{"executed_on":["cli"]}}}',
                             modules=["command_health_check.py", "command_health_check.js"])),
     "ErrInvalidJobCommandConfiguration", "use only one of .py, .ts, .js"),
    ("BunFileMissing", "tests/build_job_command_bun_test.go TestJobCommandBunFileMissing",
     steps(ONE_WORKER, job_a('{"selectors":["worker"],"commands":{"command_health_check":{"executed_on":["cli"]}}}',
                             modules=["README.md"])), "ErrJobCommandFileNotFound", None),
    ("JobVersionUpdate", "tests/build_job_test.go TestJobVersionUpdate", job_a('{"version":"1.1"}'), None, None),
    ("JobMakeFile", "tests/build_job_test.go TestJobMakeFile", job_a("{}", makefile=None), "ErrInvalidJob", None),
    ("RestartPolicy_unknown", "workspace/restart_policy.go NormalizeRestartPolicy",
     job_a('{"restart_policy": "sometimes"}'), "ErrInvalidManifest", None),
    ("rejectsInvalidCPU", "build/build_jobs_test.go TestBuildJobs_rejectsInvalidCPU",
     job_a('{"resources":{"cpu":{"min":"abc"}}}'), "ErrInvalidManifest", None),
    ("JobMaxCPUGreatherThanMin", "tests/build_job_test.go TestJobMaxCPUGreatherThanMin",
     job_a('{"resources":{"cpu":{"min":"2000 mhz","max":"1000 mhz"}}}'), "ErrInvalidManifest", None),
    ("rejectsUnsupportedMemoryRequest", "build/build_jobs_test.go TestBuildJobs_rejectsUnsupportedMemoryRequest",
     steps(job_a('{"resources":{"memory":{"min":"100 mb","max":"200 mb"}}}'),
           lambda root: ws(root, "bucket.jobs.conf", '[a]\nmemory = "300 mb"\n')),
     "ErrUnsupportedResourceConfiguration", "max_memory_mb"),
    ("rejectsRestartGlobsWithoutReloadPolicy", "build/build_jobs_test.go TestBuildJobs_rejectsRestartGlobsWithoutReloadPolicy",
     job_a('{"restart_globs":["*.conf"]}'), "ErrInvalidManifest", "restart_globs requires restart_policy reload"),
    ("JobPortPrefixFormat", "tests/build_bucket_test.go TestJobPortPrefixFormat",
     job_a('{"resources":{"ports":{"Port":{}}}}'), "ErrPortKeyFormat", None),
    ("JobPortRangeExhausted", "tests/build_bucket_test.go TestJobPortRangeExhausted",
     steps(job_a('{"resources":{"ports":{"a_port":{},"b_port":{}}}}'),
           lambda root: ws(root, "bucket.conf", 'port_min = "30000"\nport_max = "30000"\n')),
     "ErrPortRangeExhausted", None),
    ("ManifestPortsRejectInvalidValue", "workspace/ports_test.go TestManifestPortsRejectInvalidValue",
     job_a('{"resources":{"ports":{"http_port":"x"}}}'), "ErrInvalidManifestPort", None),
    ("JobPortFixedCollisionAcrossJobs", "tests/build_job_test.go TestJobPortFixedCollisionAcrossJobs",
     lambda root: (job(root, "a", '{"resources":{"ports":{"p_port":5000}}}'),
                   job(root, "b", '{"resources":{"ports":{"q_port":5000}}}')), "ErrPortCollision", None),
    ("JobInsufficientMemoryManifest", "tests/build_job_test.go TestJobInsufficientMemoryManifest",
     steps(workers('[{"host":"10.0.0.1","labels":["a"],"memory":"100 mb"}]'),
           job_a('{"resources":{"memory":{"max":"200 mb"}}}')), "ErrInsufficientResource", None),
    ("MemoryWhenWorkerUnconfigured", "tests/build_validate_test.go TestBuildRejectsJobMemoryWhenWorkerUnconfigured",
     steps(workers('[{"host":"10.0.0.1","labels":["a"]}]'), job_a('{"resources":{"memory":{"max":"200 mb"}}}')),
     "ErrInsufficientResource", "must specify memory"),
    ("BelowMinAllocationsCount", "tests/build_validate_test.go TestBuildRejectsJobBelowMinAllocationsCount",
     steps(workers('[{"host":"10.0.0.1","labels":["a"]}]'), job_a('{"min_allocations_count":2}')),
     "ErrInsufficientAllocations", "job a has 1 allocation(s)"),
    ("AtMinAllocationsCount", "tests/build_validate_test.go TestBuildAcceptsJobAtMinAllocationsCount",
     steps(workers('[{"host":"10.0.0.1","labels":["a"]},{"host":"10.0.0.2","labels":["a"]}]'),
           job_a('{"min_allocations_count":2}')), None, None),
    ("DemandUnknownJob", "tests/build_demand_validation_test.go TestValidateDemandUnknownJob",
     job_a('{"version":"1.0.0","commands":{"command_x":{"executed_on":["cli"],"demands":{"job":"nope",'
           '"command":"command_y"}}}}', modules=["command_x.py"]), "ErrInvalidJobCommandDemand", None),
    ("JobCommandCircularDependency", "tests/build_job_command_test.go TestJobCommandCircularDependency",
     lambda root: [job(root, n, {"version": "1.0.0", "selectors": ["worker"], "commands": {"command_" + n: {
         "executed_on": ["post_build"], "demands": {"job": d, "command": "command_" + d}}}}, modules=["command_%s.py" % n])
         for n, d in (("a", "b"), ("b", "a"))], "ErrCircularJobCommandDependency", None),
    ("DemandRequiresUpstreamVersion", "tests/build_demand_validation_test.go TestValidateDemandRequiresUpstreamVersion",
     lambda root: (job(root, "a", {"commands": {"command_s": {"executed_on": ["cli"]}}}, modules=["command_s.py"]),
                   job(root, "b", {"version": "1.0.0", "commands": {"command_m": {
                       "executed_on": ["cli"], "demands": {"job": "a", "command": "command_s",
                                                           "config": {"min_version": "1.0.0"}}}}},
                       modules=["command_m.py"])), "ErrInvalidJobVersion", None),
    ("DemandUnknownJob_as_maand", "tests/build_demand_validation_test.go TestValidateDemandUnknownJob",
     demand_job("b", "missing", "command_x", "1.0.0"), "ErrInvalidJobCommandDemand", None),
    ("DemandUnknownCommand", "tests/build_demand_validation_test.go TestValidateDemandUnknownCommand",
     steps(base_job("a", "command_y", "1.0.0"), demand_job("b", "a", "command_x", "1.0.0")),
     "ErrInvalidJobCommandDemand", None),
    ("DemandVersionTooLow", "tests/build_demand_validation_test.go TestValidateDemandVersionTooLow",
     steps(base_job("a", "command_x", "1.0.0"), demand_job("b", "a", "command_x", "2.0.0", ',"config":{"min_version":"2.0.0"}')),
     "ErrJobCommandDemandVersionMismatch", None),
    ("DemandVersionOk", "tests/build_demand_validation_test.go TestValidateDemandVersionOk",
     steps(base_job("a", "command_x", "2.1.0"),
           demand_job("b", "a", "command_x", "1.0.0", ',"config":{"min_version":"2.0.0","max_version":"3.0.0"}')), None, None),
    ("DemandRequiresUpstreamVersion_as_maand", "tests/build_demand_validation_test.go TestValidateDemandRequiresUpstreamVersion",
     steps(base_job("a", "command_x", ""), demand_job("b", "a", "command_x", "1.0.0", ',"config":{"min_version":"1.0.0"}')),
     "ErrInvalidJobVersion", None),
    ("JobMemoryAboveWorkerCapacity", "tests/build_validate_test.go TestBuildRejectsJobMemoryAboveWorkerCapacity",
     steps(workers('[{"host":"10.0.0.1","memory":"128mb"}]'), lambda root: job(root, "heavy", '{\n\t\t"selectors": ["worker"],'
           '\n\t\t"resources": {\n\t\t\t"memory": {"min": "256mb", "max": "512mb"}\n\t\t}\n\t}')),
     "ErrInsufficientResource", None),
    ("DuplicateWorkerHost", "tests/build_validate_test.go TestBuildRejectsDuplicateWorkerHost",
     workers('[{"host":"10.0.0.1"},{"host":"10.0.0.1"}]'), "ErrInvalidWorkerJSON", None),
    # build/validate_test.go (its SQLite rows as a workspace: worker 10.0.0.1, job app placed there)
    ("requiresWorkerMemory", "build/validate_test.go TestValidateWorkerResources_requiresWorkerMemoryWhenJobNeedsMemory",
     app_on_one_worker('{"host":"10.0.0.1","labels":["app"]}', '{"resources":{"memory":{"max":"512"}}}'),
     "ErrInsufficientResource", "must specify memory"),
    ("requiresWorkerCPU", "build/validate_test.go TestValidateWorkerResources_requiresWorkerCPUWhenJobNeedsCPU",
     app_on_one_worker('{"host":"10.0.0.1","labels":["app"]}', '{"resources":{"cpu":{"max":"2000"}}}'),
     "ErrInsufficientResource", "must specify cpu"),
    ("insufficientMemory", "build/validate_test.go TestValidateWorkerResources_insufficientMemory",
     app_on_one_worker('{"host":"10.0.0.1","labels":["app"],"memory":"256","cpu":"1000"}', '{"resources":{"memory":{"max":"512"}}}'),
     "ErrInsufficientResource", "available memory"),
    ("insufficientCPU", "build/validate_test.go TestValidateWorkerResources_insufficientCPU",
     app_on_one_worker('{"host":"10.0.0.1","labels":["app"],"memory":"1024","cpu":"500"}', '{"resources":{"cpu":{"max":"2000"}}}'),
     "ErrInsufficientResource", "available cpu"),
    ("skipsWhenJobHasNoRequirements", "build/validate_test.go TestValidateWorkerResources_skipsWhenJobHasNoRequirements",
     app_on_one_worker('{"host":"10.0.0.1","labels":["app"]}', "{}"), None, None),
    ("MinAllocations_rejectsWhenBelowMinimum", "build/validate_test.go TestValidateMinAllocationsCount_rejectsWhenBelowMinimum",
     app_on_one_worker('{"host":"10.0.0.1","labels":["app"]}', '{"min_allocations_count":2}'),
     "ErrInsufficientAllocations", "job app has 1 allocation(s)"),
    ("MinAllocations_passesWhenMinimumMet", "build/validate_test.go TestValidateMinAllocationsCount_passesWhenMinimumMet",
     steps(app_on_one_worker('{"host":"10.0.0.1","labels":["app"]},{"host":"10.0.0.2","labels":["app"]}',
                             '{"min_allocations_count":2}'),
           lambda root: ws(root, "disabled.json", '{"jobs":{"app":{"allocations":["10.0.0.2"]}}}')), None, None),
    # build/validate_demands_test.go
    ("Demands_noDemands", "build/validate_demands_test.go TestValidateJobCommandDemands_noDemands",
     jobs(("api", '{"selectors":["web"],"version":"1.0.0"}')), None, None),
    ("Demands_validDemand", "build/validate_demands_test.go TestValidateJobCommandDemands_validDemand",
     jobs(DV_DB_SCHEMA, dv_api("db", ',"config":{"min_version":"2.0.0","max_version":"3.0.0"}')), None, None),
    ("Demands_unknownJob", "build/validate_demands_test.go TestValidateJobCommandDemands_unknownJob",
     jobs(dv_api("missing")), "ErrInvalidJobCommandDemand", None),
    ("Demands_unknownCommand", "build/validate_demands_test.go TestValidateJobCommandDemands_unknownCommand",
     jobs(("db", '{"selectors":["db"],"version":"1.0.0"}'), dv_api("db")), "ErrInvalidJobCommandDemand", None),
    ("Demands_requiresUpstreamVersion", "build/validate_demands_test.go TestValidateJobCommandDemands_requiresUpstreamVersion",
     jobs(("db", '{\n\t\t"selectors":["db"],\n\t\t"commands":{"command_schema":{"executed_on":["cli"]}}\n\t}', ["command_schema.py"]),
          dv_api("db", ',"config":{"min_version":"1.0.0"}')), "ErrInvalidJobVersion", None),
    ("Demands_versionMismatch", "build/validate_demands_test.go TestValidateJobCommandDemands_versionMismatch",
     jobs(("db", '{\n\t\t"selectors":["db"],\n\t\t"version":"1.0.0",\n\t\t"commands":{"command_schema":{"executed_on":["cli"]}}\n\t}',
           ["command_schema.py"]), dv_api("db", ',"config":{"min_version":"2.0.0"}')), "ErrJobCommandDemandVersionMismatch", None),
    # build/execute_test.go
    ("Execute_rejectsInvalidDemand", "build/execute_test.go TestExecute_rejectsInvalidDemand",
     steps(EXEC_MINIMAL, jobs(("consumer", '{\n\t\t"version": "1.0.0",\n\t\t"selectors": ["web"],\n\t\t"commands": {\n\t\t\t'
                                           '"command_dep": {\n\t\t\t\t"executed_on": ["cli"],\n\t\t\t\t"demands": {"job": "api", '
                                           '"command": "missing_command"}\n\t\t\t}\n\t\t}\n\t}', ["command_dep.py"]))),
     "ErrInvalidJobCommandDemand", None),
    # build/build_jobs_test.go
    ("BuildJobs_rejectsInvalidCommandName", "build/build_jobs_test.go TestBuildJobs_rejectsInvalidCommandName",
     jobs(("api", '{\n\t\t"selectors": ["web"],\n\t\t"commands": {"bad": {"executed_on": ["cli"]}}\n\t}', ["bad.py"])),
     "ErrInvalidJobCommandConfiguration", None),
    ("BuildJobs_rejectsReservedDataDirectory", "build/build_jobs_test.go TestBuildJobs_rejectsReservedDataDirectory",
     steps(jobs(("api", '{"selectors":["web"]}')), lambda root: os.makedirs(os.path.join(str(root), "workspace/jobs/api/data"))),
     "ErrInvalidJob", "data directory is reserved"),
    # build/build_deployment_sequence_test.go (its job_commands rows as manifests)
    ("DetectCircular_cycle", "build/build_deployment_sequence_test.go TestDetectCircularJobCommandDependencies_cycle",
     jobs(seq_job("a", "command_a", ("b", "command_b")), seq_job("b", "command_b", ("c", "command_c")),
          seq_job("c", "command_c", ("a", "command_a"))), "ErrCircularJobCommandDependency", None),
    ("DetectCircular_acyclic", "build/build_deployment_sequence_test.go TestDetectCircularJobCommandDependencies_acyclic",
     jobs(seq_job("consumer", "command_consumer", ("db", "command_db")), seq_job("db", "command_db")), None, None),
    ("DeploymentSequence_rejectsCycle", "build/build_deployment_sequence_test.go TestBuildDeploymentSequence_rejectsCycle",
     jobs(seq_job("a", "command_a", ("b", "command_b")), seq_job("b", "command_b", ("a", "command_a"))),
     "ErrCircularJobCommandDependency", None),
    # workspace/*_test.go: manifest readers, through a build
    ("ValidatePortKey_empty", "workspace/ports_test.go TestValidatePortKey (\"\")",
     jobs(("api", '{"resources":{"ports":{"": {}}}}')), "ErrPortKeyFormat", None),
    ("ValidatePortKey_BadPort", "workspace/ports_test.go TestValidatePortKey (Bad-Port)",
     jobs(("api", '{"resources":{"ports":{"Bad-Port": {}}}}')), "ErrPortKeyFormat", None),
    ("NormalizeRestartPolicy_bounce", "workspace/restart_policy_test.go TestNormalizeRestartPolicy (bounce)",
     jobs(("api", '{"restart_policy":"bounce"}')), "ErrInvalidManifest", None),
    ("ValidateRestartPolicy_invalid", "workspace/restart_policy_test.go TestValidateRestartPolicy (invalid)",
     jobs(("api", '{"restart_policy":"invalid"}')), "ErrInvalidManifest", None),
    ("ValidateRestartPolicy_never", "workspace/restart_policy_test.go TestValidateRestartPolicy (never)",
     jobs(("api", '{"restart_policy":"never"}')), None, None),
    ("ValidateRestartGlobsRequiresReloadPolicy", "workspace/restart_policy_test.go TestValidateRestartGlobsRequiresReloadPolicy",
     jobs(("api", '{"restart_policy":"always","restart_globs":["Makefile"]}')), "ErrInvalidManifest",
     "restart_globs requires restart_policy reload"),
    ("ValidateRestartGlobsPatterns_bad", "workspace/restart_policy_test.go TestValidateRestartGlobsPatterns ([)",
     lambda root: job(root, "api", '{"restart_policy":"reload","restart_globs":["["]}', makefile="reload:\n"),
     "ErrInvalidManifest", None),
    ("ValidateRestartGlobsPatterns_ok", "workspace/restart_policy_test.go TestValidateRestartGlobsPatterns",
     # here restart_policy reload also needs a reload target in the Makefile (docs/parity.md, Differences from maand)
     lambda root: job(root, "api", '{"restart_policy":"reload","restart_globs":["Makefile","bin/**"]}', makefile="reload:\n"),
     None, None),
    ("VersionConstraint_ok", "workspace/version_test.go TestVersionConstraint (upstream 2.0.0, 1.0.0 <= v <= 2.5.0)",
     jobs(("db", '{"version":"2.0.0","commands":{"command_schema":{"executed_on":["cli"]}}}', ["command_schema.py"]),
          ("api", '{"version":"1.0.0","commands":{"command_x":{"executed_on":["cli"],"demands":{"job":"db","command":'
                  '"command_schema","config":{"min_version":"1.0.0","max_version":"2.5.0"}}}}}', ["command_x.py"])), None, None),
    ("VersionConstraint_number", "workspace/version_test.go TestVersionConstraint (min_version 3, a number)",
     jobs(("db", '{"version":"2.0.0","commands":{"command_schema":{"executed_on":["cli"]}}}', ["command_schema.py"]),
          ("api", '{"version":"1.0.0","commands":{"command_x":{"executed_on":["cli"],"demands":{"job":"db","command":'
                  '"command_schema","config":{"min_version":3}}}}}', ["command_x.py"])), "ErrJobCommandDemandVersionMismatch", None),
    ("ValidateDemandReference_jobOnly", "workspace/version_test.go TestValidateDemandReference (job without command)",
     jobs(("db", '{"version":"1.0.0","commands":{"command_schema":{"executed_on":["cli"]}}}', ["command_schema.py"]),
          ("api", '{"version":"1.0.0","commands":{"command_x":{"executed_on":["cli"],"demands":{"job":"db"}}}}', ["command_x.py"])),
     "ErrInvalidJobCommandDemand", None),
    ("ValidateDemandReference_both", "workspace/version_test.go TestValidateDemandReference (job and command)",
     jobs(("db", '{"version":"1.0.0","commands":{"command_schema":{"executed_on":["cli"]}}}', ["command_schema.py"]),
          ("api", '{"version":"1.0.0","commands":{"command_x":{"executed_on":["cli"],"demands":{"job":"db",'
                  '"command":"command_schema"}}}}', ["command_x.py"])), None, None),
    ("ManifestListedCommands", "workspace/manifest_test.go TestManifestListedCommands (a command named run)",
     jobs(("api", '{"commands":{"run":{}}}')), "ErrInvalidJobCommandConfiguration", "command name must start with command_"),
]


@pytest.mark.parametrize("name, source, setup, kind, words", CASES, ids=[c[0] for c in CASES])
def test_maand_build_outcome(tmp_path, name, source, setup, kind, words):
    root = init_bucket(tmp_path)
    setup(root)
    if source.startswith("tests/"):  # maand's tests/ package builds through its harness
        harness_labels(root)
    result = _service.compute(root)
    text = "\n".join(str(p) for p in result.report.errors)
    if kind is None:
        assert result.report.ok, "%s (%s) builds in maand; here: %s" % (name, source, text)
        return
    assert kind in {p.kind for p in result.report.errors}, "%s (%s) wants %s; here: %s" % (name, source, kind, text or "OK")
    if words:
        assert words in text, text
    for problem in result.report.errors:
        assert problem.file and problem.fix, str(problem)  # every error names a file and a fix


def test_init_ssh_port_zero_means_22(tmp_path):
    """maand bucket/config.go SSHPort: ssh_port <= 0 -> 22."""
    root = init_bucket(tmp_path)
    bucket = _service.compute(root).bucket
    assert bucket.conf["ssh_port"] == 22
    write(os.path.join(root, "maand.conf"), 'ssh_port = 2222\n')
    assert _service.compute(root).bucket.conf["ssh_port"] == 2222
    write(os.path.join(root, "maand.conf"), 'ssh_port = 70000\n')
    assert "ErrInvalidMaandConf" in {p.kind for p in _service.compute(root).report.errors}


def test_missing_workers_json_builds_zero_workers_with_a_hint(tmp_path):
    root = init_bucket(tmp_path)
    no_workers_json(root)
    job(root, "a", "{}")
    result = _service.compute(root)
    assert result.report.ok and result.catalog["workers"] == [] and result.catalog["allocations"] == []
    assert any("zero workers" in str(w) for w in result.report.warnings)


def test_folder_without_manifest_is_not_a_job_and_warns(tmp_path):
    root = init_bucket(tmp_path)
    os.makedirs(os.path.join(root, "workspace", "jobs", "notes"))
    job(root, "a", "{}")
    result = _service.compute(root)
    assert result.report.ok and [j["name"] for j in result.catalog["jobs"]] == ["a"]
    assert any(w.file == "workspace/jobs/notes" and "not a job" in w.message for w in result.report.warnings)


@pytest.mark.parametrize("written", ["1.1", "v2", "1.2", "2.0.0-rc1", "3"])
def test_version_kept_as_written(tmp_path, written):
    """tests/build_job_test.go TestJobVersionUpdate: "1.1" is stored as "1.1"."""
    root = init_bucket(tmp_path)
    job(root, "a", {"version": written})
    result = _service.compute(root)
    assert result.report.ok
    assert result.catalog["jobs"][0]["version"] == written


def test_version_must_be_a_string(tmp_path):
    root = init_bucket(tmp_path)
    job(root, "a", {"version": 2})
    result = _service.compute(root)
    assert [(p.kind, p.field) for p in result.report.errors] == [("ErrInvalidManifest", "version")]
    assert "of type string" in str(result.report.errors[0])


@pytest.mark.parametrize("conf, key", [
    ("[a]\nmemory = 512\n", "a.memory"), ("[a]\nflag = true\n", "a.flag"), ("[a]\nwhen = 2024-01-01\n", "a.when"),
    ("[a]\nratio = 1.5\n", "a.ratio"), ("[a]\nlist = [\"x\"]\n", "a.list"),
])
def test_bucket_jobs_conf_values_must_be_strings(tmp_path, conf, key):
    root = init_bucket(tmp_path)
    job(root, "a", "{}")
    ws(root, "bucket.jobs.conf", conf)
    result = _service.compute(root)
    assert [(p.kind, p.file, p.field) for p in result.report.errors] == [
        ("ErrInvalidBucketConf", "workspace/bucket.jobs.conf", key)]
    assert "quote the value" in result.report.errors[0].fix


def test_bucket_conf_values_must_be_strings(tmp_path):
    """bucket/port_range.go LoadPortRange and build/build_variables.go read bucket.conf as map[string]string."""
    root = init_bucket(tmp_path)
    ws(root, "bucket.conf", 'port_min = 30000\nport_max = "39999"\nstarted = 1979-05-27T07:32:00Z\n')
    result = _service.compute(root)
    assert sorted(p.field for p in result.report.errors if p.kind == "ErrInvalidBucketConf") == ["port_min", "started"]


def test_explicit_worker_label_is_not_a_duplicate(tmp_path):
    """maand's docs list "worker" among labels (docs/start/04-workers.md); see docs/parity.md, Differences from maand."""
    root = init_bucket(tmp_path)
    ws(root, "workers.json", '[{"host":"10.0.0.1","labels":["worker","web"]}]')
    assert _service.compute(root).report.ok
    ws(root, "workers.json", '[{"host":"10.0.0.1","labels":["web"," WEB"]}]')
    result = _service.compute(root)
    assert [p.field for p in result.report.errors] == ["[0].labels"]


# workspace/version_test.go TestParseVersion / TestVersionCompare, plus version.go's rules
@pytest.mark.parametrize("text, parsed", [("2.1.0", "2.1.0"), ("v1", "1.0.0"), ("V1.2", "1.2.0"), (" 01.2 ", "1.2.0"),
                                          ("1.2.0-rc1", "1.2.0-rc1"), ("1-a-b", "1.0.0-a-b")])
def test_parse_version_as_maand(text, parsed):
    assert str(parse_version(text)) == parsed


@pytest.mark.parametrize("text", ["unknown", "UNKNOWN", "1.2.3.4", "", "1-", "1..2", "x"])
def test_parse_version_rejects_as_maand(text):
    with pytest.raises(ValueError):
        parse_version(text)


def test_version_compare_as_maand():
    a, b, c, d = (parse_version(v) for v in ("1.2.0", "1.10.0", "1.2.0-rc1", "1.2.0"))
    assert a < b and a == d and c < d
    # maand compares prereleases as plain strings (workspace/version.go Compare)
    assert parse_version("1.0.0-10") < parse_version("1.0.0-9")


# Go tests that assert stored values (KV / DB rows); here the same values in data/catalog.json.
def _job(result, name="a"):
    return next(j for j in result.catalog["jobs"] if j["name"] == name)


def _worker(result, host="10.0.0.1"):
    return next(w for w in result.catalog["workers"] if w["host"] == host)


VALUE_CASES = [
    ("JobMinSetToMaxIfNotFound", "tests/build_job_test.go TestJobMinSetToMaxIfNotFound",
     job_a('{"resources":{"cpu": {"min":"12 Ghz"}, "memory":{"min":"12 GB"}}}'),
     lambda r: (_job(r)["min_cpu_mhz"], _job(r)["max_cpu_mhz"], _job(r)["min_memory_mb"], _job(r)["max_memory_mb"]),
     (12000.0, 12000.0, 12288.0, 12288.0)),
    ("JobMaxCPUGreatherThanMin_equal", "tests/build_job_test.go TestJobMaxCPUGreatherThanMin",
     job_a('{"resources":{"cpu": {"min":"12", "max": "12"}}}'), lambda r: _job(r)["max_cpu_mhz"], 12.0),
    ("JobMaxCPUGreatherThanMin_above", "tests/build_job_test.go TestJobMaxCPUGreatherThanMin",
     job_a('{"resources":{"memory": {"min":"12", "max": "13"}}}'), lambda r: _job(r)["max_memory_mb"], 13.0),
    ("JobMaxMemoryAsDefaultIfNotInJobConf", "tests/build_job_test.go TestJobMaxMemoryAsDefaultIfNotInJobConf",
     steps(workers('[{"host":"10.0.0.1", "memory": "12", "cpu": "12"}]'),
           job_a('{"selectors":["worker"], "resources":{"cpu": {"min":"12", "max": "12"}}}')),
     lambda r: (_job(r)["cpu_mhz"], r.catalog["allocations"][0]["cpu_mhz"]), (12.0, 12.0)),
    ("JobConfMemoryCPUConv", "tests/build_job_test.go TestJobConfMemoryCPUConv",
     steps(job_a("{}"), lambda root: ws(root, "bucket.jobs.conf", '\n[a]\nmemory="1 GB"\ncpu="1 GHZ"\n')),
     lambda r: (_job(r)["memory_mb"], _job(r)["cpu_mhz"], _job(r)["memory_source"]), (1024.0, 1000.0, "bucket.jobs.conf")),
    ("JobPortCollisionWithinJob", "tests/build_job_test.go TestJobPortCollisionWithinJob",
     job_a('{"resources":{"ports": {"web_port": {}, "web_port1": {}}}}'),
     lambda r: len(set(_job(r)["ports"].values())), 2),
    ("JobAutoAssignUniquePorts", "tests/build_job_test.go TestJobAutoAssignUniquePorts",
     lambda root: (job(root, "a", '{"resources":{"ports": {"a_port_web": {}}}}'),
                   job(root, "b", '{"resources":{"ports": {"b_port_web": {}}}}')),
     lambda r: _job(r, "a")["ports"]["a_port_web"] != _job(r, "b")["ports"]["b_port_web"], True),
    ("WorkerCPU_none", "tests/build_worker_resources_test.go TestWorkerCPU", ONE_WORKER,
     lambda r: _worker(r)["cpu_mhz"] or 0, 0),
    ("WorkerCPU_100", "tests/build_worker_resources_test.go TestWorkerCPU",
     workers('[{ "host": "10.0.0.1", "cpu": "100" }]'), lambda r: _worker(r)["cpu_mhz"], 100.0),
    ("WorkerCPU_100GHz", "tests/build_worker_resources_test.go TestWorkerCPU",
     workers('[{ "host": "10.0.0.1", "cpu": "100 GHz" }]'), lambda r: _worker(r)["cpu_mhz"], 100000.0),
    ("WorkerMemory_23", "tests/build_worker_resources_test.go TestWorkerMemory",
     workers('[{ "host": "10.0.0.1", "memory": "23" }]'), lambda r: _worker(r)["memory_mb"], 23.0),
    ("WorkerMemory_23GB", "tests/build_worker_resources_test.go TestWorkerMemory",
     workers('[{ "host": "10.0.0.1", "memory": "23 GB" }]'), lambda r: _worker(r)["memory_mb"], 23552.0),
    ("WorkerPostion", "tests/build_worker_position_test.go TestWorkerPostionAdded",
     workers('[{ "host": "10.0.0.1" },{ "host": "10.0.0.2" },{ "host": "10.0.0.3" }]'),
     lambda r: {w["host"]: w["position"] for w in r.catalog["workers"]}, {"10.0.0.1": 0, "10.0.0.2": 1, "10.0.0.3": 2}),
    ("WorkerLabelsAdded", "tests/build_worker_label_test.go TestWorkerLabelsAdded",
     workers('[{ "host": "10.0.0.1", "labels": ["a", "z"] }, { "host": "10.0.0.2", "labels": ["b"] }]'),
     lambda r: [w["labels"] for w in r.catalog["workers"]], [["a", "worker", "z"], ["b", "worker"]]),
    ("ManifestDefaults_clamped", "workspace/manifest.go GetMaxConcurrentUpgrades (a negative count is refused:"
     " tests/unit/plugin_utils/bucket/test_manifest_wording.py)",
     job_a('{"max_concurrent_starts": 0, "max_concurrent_upgrades": 0}'),
     lambda r: (_job(r)["max_concurrent_starts"], _job(r)["max_concurrent_upgrades"]), (0, 1)),
    ("ManifestDefaults", "workspace/manifest_test.go TestManifestDefaults", job_a("{}"),
     lambda r: (_job(r)["max_concurrent_starts"], _job(r)["max_concurrent_upgrades"], _job(r)["min_allocations_count"],
                _job(r)["restart_policy"], _job(r)["selectors"]), (0, 1, 0, "always", ["a"])),
    ("RestartPolicy_empty", "workspace/restart_policy.go NormalizeRestartPolicy (\"\" -> always)",
     job_a('{"restart_policy": ""}'), lambda r: _job(r)["restart_policy"], "always"),
    ("WorkerHost_trimmed", "workspace/workspace.go GetWorkers (strings.TrimSpace(raw.Host))",
     workers('[{ "host": " 10.0.0.1 ", "hostname": " w1 " }]'), lambda r: (_worker(r)["host"], _worker(r)["hostname"]),
     ("10.0.0.1", "w1")),
    ("WorkerTag_lowercase", "workspace/worker.go NewWorker (tags lower-cased and trimmed)",
     workers('[{ "host": "10.0.0.1", "tags": {"Zone": " A "} }]'), lambda r: _worker(r)["tags"], {"zone": "a"}),
    ("placesJobByNameSelectorOnly", "build/build_jobs_test.go TestBuildAllocations_placesJobByNameSelectorOnly",
     steps(workers('[{"host":"10.0.0.1","labels":["a"]},{"host":"10.0.0.2"}]'), job_a("{}")),
     lambda r: [(a["job"], a["worker"]) for a in r.catalog["allocations"]], [("a", "10.0.0.1")]),
    ("JobSelectorsAndOperator", "tests/build_bucket_test.go TestJobSelectorsAndOperator",
     steps(workers('[{"host":"10.0.0.1","labels":["x","y"]},{"host":"10.0.0.2","labels":["x"]}]'),
           job_a('{"selectors":["x","y"]}')),
     lambda r: [a["worker"] for a in r.catalog["allocations"]], ["10.0.0.1"]),
    ("deduplicatesManifestSelectors", "workspace/manifest_test.go TestPlacementSelectors_deduplicatesManifestSelectors",
     job_a('{"selectors":["x","x","y"]}'), lambda r: _job(r)["selectors"], ["x", "y"]),
    # build/validate_demands_test.go, build/execute_test.go, build/build_jobs_test.go, build/build_deployment_sequence_test.go
    ("LoadJobCatalog_resolvesVersions", "build/validate_demands_test.go TestLoadJobCatalog_resolvesVersions",
     jobs(("api", '{"selectors":["web"],"version":"1.2.3"}')), lambda r: _job(r, "api")["version"], "1.2.3"),
    ("JobCatalog_isDemandTarget", "build/validate_demands_test.go TestJobCatalog_isDemandTarget",
     jobs(("db", '{"selectors":["db"],"version":"1.0.0","commands":{"command_schema":{"executed_on":["cli"]}}}', ["command_schema.py"]),
          ("api", '{\n\t\t"selectors":["web"],\n\t\t"version":"1.0.0",\n\t\t"commands":{"command_migrate":{"executed_on":["cli"],'
                  '"demands":{"job":"db","command":"command_schema"}}}\n\t}', ["command_migrate.py"])),
     lambda r: (_job(r, "db")["deployment_seq"], _job(r, "api")["deployment_seq"]), (0, 1)),
    ("Execute_syncsMinimalWorkspace", "build/execute_test.go TestExecute_syncsMinimalWorkspace", EXEC_MINIMAL,
     lambda r: ([w["host"] for w in r.catalog["workers"]], [(a["job"], a["worker"]) for a in r.catalog["allocations"]]),
     (["10.0.0.1"], [("api", "10.0.0.1")])),
    ("Execute_runsPostBuildHook", "build/execute_test.go TestExecute_runsPostBuildHook",
     steps(EXEC_WORKERS, jobs(("api", '{\n\t\t"version": "1.0.0",\n\t\t"selectors": ["web"],\n\t\t"resources": {\n\t\t\t"memory": '
                                      '{"min": "128", "max": "256"},\n\t\t\t"cpu": {"min": "100", "max": "200"}\n\t\t},\n\t\t'
                                      '"commands": {\n\t\t\t"command_post_build": {"executed_on": ["post_build"]}\n\t\t}\n\t}',
                               ["command_post_build.py"]))),
     lambda r: [n for n, c in _job(r, "api")["commands"].items() if "post_build" in c["executed_on"]], ["command_post_build"]),
    ("BuildJobsFromWorkspaceManifest", "build/build_jobs_test.go TestBuildJobsFromWorkspaceManifest",
     jobs(("api", '{\n\t\t"version": "1.0.0",\n\t\t"selectors": ["web"],\n\t\t"resources": {\n\t\t\t"memory": {"min": "128", '
                  '"max": "256"},\n\t\t\t"cpu": {"min": "100", "max": "200"},\n\t\t\t"ports": {"http_port": {}}\n\t\t}\n\t}')),
     lambda r: [(j["name"], j["version"]) for j in r.catalog["jobs"]], [("api", "1.0.0")]),
    ("BuildJobs_storesPlacementSelectors", "build/build_jobs_test.go TestBuildJobs_storesPlacementSelectors",
     jobs(("api", '{"selectors":["web"]}')), lambda r: _job(r, "api")["selectors"], ["web"]),
    ("BuildWorkersFromWorkspace", "build/build_jobs_test.go TestBuildWorkersFromWorkspace",
     workers('[{"host":"10.0.0.1","labels":["web"],"memory":"1024","cpu":"2000","position":0}]'),
     lambda r: [(w["host"], "web" in w["labels"]) for w in r.catalog["workers"]], [("10.0.0.1", True)]),
    ("SortedJobNames", "build/build_jobs_test.go TestSortedJobNames (sortedJobNames: jobs in name order)",
     jobs(("c", "{}"), ("a", "{}"), ("b", "{}")), lambda r: [j["name"] for j in r.catalog["jobs"]], ["a", "b", "c"]),
    ("BuildJobs_syncsFixedPort", "build/build_jobs_test.go TestBuildJobs_syncsFixedPort",
     jobs(("api", '{\n\t\t"selectors": ["web"],\n\t\t"resources": {\n\t\t\t"ports": {"metrics_port": 31000}\n\t\t}\n\t}')),
     lambda r: _job(r, "api")["ports"], {"metrics_port": 31000}),
    ("BuildJobsSyncsHealthCheckAndCommands", "build/build_jobs_test.go TestBuildJobsSyncsHealthCheckAndCommands",
     steps(jobs(("api", '{\n\t\t"version": "1.0.0",\n\t\t"selectors": ["web"],\n\t\t"health_check": {\n\t\t\t"checks": [{"type": '
                        '"http", "port": "http_port", "path": "/health"}]\n\t\t},\n\t\t"resources": {\n\t\t\t"memory": {"min": '
                        '"128", "max": "256"},\n\t\t\t"ports": {"http_port": {}}\n\t\t},\n\t\t"commands": {\n\t\t\t"command_status":'
                        ' {\n\t\t\t\t"executed_on": ["cli"],\n\t\t\t\t"demands": {"job": "", "command": ""}\n\t\t\t}\n\t\t}\n\t}',
                 ["command_status.py"])), lambda root: ws(root, "bucket.jobs.conf", '[api]\nmemory = "192 mb"\n')),
     lambda r: ("http" in str(_job(r, "api")["health_check"]), len(_job(r, "api")["commands"]), _job(r, "api")["memory_mb"],
                _job(r, "api")["memory_source"], _job(r, "api")["cpu_source"]), (True, 1, 192.0, "bucket.jobs.conf", "manifest")),
    ("BuildJobsSyncsCertsFromManifest", "build/build_jobs_test.go TestBuildJobsSyncsCertsFromManifest",
     jobs(("api", '{\n\t\t"selectors": ["web"],\n\t\t"certs": {\n\t\t\t"tls": {\n\t\t\t\t"pkcs8": true,\n\t\t\t\t"one": false,\n\t\t\t\t'
                  '"subject": {"common_name": "api.local"}\n\t\t\t}\n\t\t}\n\t}')),
     lambda r: [c["name"] for c in _job(r, "api")["certs"]], ["tls"]),
    ("LoadJobCertSpecs", "build/build_certs_test.go TestLoadJobCertSpecs (seedBuildCertsDB's job_certs row)",
     jobs(("api", '{"version":"1.0.0","certs":{"tls":{"pkcs8":true,"one":false,"subject":{"common_name":"api"}}}}')),
     lambda r: [(c["name"], c["pkcs8"]) for c in _job(r, "api")["certs"]], [("tls", True)]),
    ("SyncJobPortsAssignsFromManifest", "build/build_ports_sync_test.go TestSyncJobPortsAssignsFromManifest",
     steps(lambda root: ws(root, "bucket.conf", 'port_min = "30000"\nport_max = "30010"\n'),
           jobs(("api", '{"resources":{"ports":{"http_port":{}}}}'))), lambda r: _job(r, "api")["ports"], {"http_port": 30000}),
    ("LoadJobCommandDependencies", "build/build_deployment_sequence_test.go TestLoadJobCommandDependencies",
     jobs(seq_job("db", "command_schema"), seq_job("api", "command_migrate", ("db", "command_schema"))),
     lambda r: (_job(r, "db")["deployment_seq"], _job(r, "api")["deployment_seq"]), (0, 1)),
    ("DeploymentSequence_ordersDependentJobs", "build/build_deployment_sequence_test.go TestBuildDeploymentSequence_ordersDependentJobs",
     steps(ONE_WORKER, jobs(seq_job("db", "command_schema"), seq_job("api", "command_migrate", ("db", "command_schema")))),
     lambda r: [(a["job"], a["deployment_seq"]) for a in sorted(r.catalog["allocations"], key=lambda a: a["deployment_seq"])],
     [("db", 0), ("api", 1)]),
    ("BuildAllocations_createsNewAllocation", "build/build_allocations_test.go TestBuildAllocations_createsNewAllocation",
     steps(workers('[{"host":"10.0.0.3","labels":["web"],"memory":"1024","cpu":"2000"}]'),
           jobs(("web", '{"version":"2.0.0","selectors":["web"]}'))),
     lambda r: ([(a["job"], a["worker"], a["state"]) for a in r.catalog["allocations"]], _job(r, "web")["version"]),
     ([("web", "10.0.0.3", "active")], "2.0.0")),
    ("ManifestPortsUnmarshalEmptyObject", "workspace/ports_test.go TestManifestPortsUnmarshalEmptyObject",
     jobs(("api", '{\n\t\t"resources": {"ports": {"database_port": {}, "http_port": {}}}\n\t}')),
     lambda r: sorted(_job(r, "api")["ports"].items()), [("database_port", 30000), ("http_port", 30001)]),
    ("ManifestPortsUnmarshalInteger", "workspace/ports_test.go TestManifestPortsUnmarshalInteger",
     jobs(("api", '{\n\t\t"resources": {"ports": {"database_port": 5432, "http_port": {}}}\n\t}')),
     lambda r: _job(r, "api")["ports"], {"database_port": 5432, "http_port": 30000}),
    ("ValidatePortKey_ok", "workspace/ports_test.go TestValidatePortKey (database_port)",
     jobs(("api", '{"resources":{"ports":{"database_port": {}}}}')), lambda r: list(_job(r, "api")["ports"]), ["database_port"]),
    ("PlacementSelectors_jobNameOnlyWhenEmpty", "workspace/manifest_test.go TestPlacementSelectors_jobNameOnlyWhenEmpty",
     jobs(("prometheus", "{}")), lambda r: _job(r, "prometheus")["selectors"], ["prometheus"]),
    ("PlacementSelectors_usesManifestSelectorsWhenSet", "workspace/manifest_test.go TestPlacementSelectors_usesManifestSelectorsWhenSet",
     jobs(("api", '{"selectors":["worker","prod"]}')), lambda r: _job(r, "api")["selectors"], ["worker", "prod"]),
    ("NormalizeRestartPolicy_reload", "workspace/restart_policy_test.go TestNormalizeRestartPolicy (reload)",
     lambda root: job(root, "api", '{"restart_policy":"reload"}', makefile="reload:\n"), lambda r: _job(r, "api")["restart_policy"],
     "reload"),
    ("EncodeParseRestartGlobs", "workspace/restart_policy_test.go TestEncodeParseRestartGlobs",
     lambda root: job(root, "api", '{"restart_policy":"reload","restart_globs":["Makefile","bin/**"]}', makefile="reload:\n"),
     lambda r: _job(r, "api")["restart_globs"], ["Makefile", "bin/**"]),
    ("BuildStoresHealthCheckJSON", "tests/healthcheck_manifest_test.go TestBuildStoresHealthCheckJSON",
     steps(workers('[{"host":"10.0.0.1","labels":["app"]}]'),
           job_a_named("app", '{\n\t\t"selectors": ["app"],\n\t\t"resources": {"ports": {"api_port": 30010}},\n\t\t"health_check": '
                              '{\n\t\t\t"checks": [\n\t\t\t\t{"type": "tcp", "port": "api_port"},\n\t\t\t\t{"type": "ssh", '
                              '"command": "true"}\n\t\t\t]\n\t\t}\n\t}')),
     lambda r: [(c["type"], c.get("command")) for c in _job(r, "app")["health_check"]["checks"]], [("tcp", None), ("ssh", "true")]),
]


@pytest.mark.parametrize("name, source, setup, get, expected", VALUE_CASES, ids=[c[0] for c in VALUE_CASES])
def test_maand_build_values(tmp_path, name, source, setup, get, expected):
    root = init_bucket(tmp_path)
    setup(root)
    if source.startswith("tests/"):  # maand's tests/ package builds through its harness
        harness_labels(root)
    result = _service.compute(root)
    assert result.report.ok, [str(p) for p in result.report.errors]
    assert get(result) == expected, source


@pytest.mark.parametrize("source, folders", [("tests/build_bucket_test.go TestBuildUnInitialized", ["workspace"]),
                                             ("build/execute_test.go TestExecute_notInitialized", [])])
def test_build_uninitialized(tmp_path, source, folders):
    """A folder `maand init` never ran in (with workspace/, or empty) is refused with ErrNotInitialized (maand: no
    data/maand.db; here: no maand.conf), and no catalog is written."""
    for folder in folders:
        os.makedirs(os.path.join(str(tmp_path), folder))
    result = _service.build(str(tmp_path))
    assert [(p.kind, p.file) for p in result.report.errors] == [("ErrNotInitialized", "maand.conf")]
    assert "maand.core.init" in result.report.errors[0].fix
    assert not os.path.exists(os.path.join(str(tmp_path), "data", "catalog.json"))
