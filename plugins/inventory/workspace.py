# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: workspace
short_description: Workers, allocations and job groups of a maand bucket
version_added: 1.0.0
description:
  - Reads the catalog C(data/catalog.json) of a maand bucket, written by the C(maand.core.build) playbook,
    and exposes its workers as hosts. The catalog is the one truth at deploy time.
  - The catalog records a fingerprint of every build input (C(maand.conf), C(workspace/bucket.conf),
    C(workspace/bucket.jobs*.conf), C(workspace/workers.json), C(workspace/disabled.json) and every job
    folder under C(workspace/jobs/)). When the workspace differs from it, the source fails with
    C(workspace changed since the last build; run maand.core.build), naming what changed.
  - Except under C(ansible-playbook) running only maand.core playbooks that may run on the last built catalog
    (status, health_check, cat, info, logs, job, run_command, cert_metrics; the table is in
    C(plugins/plugin_utils/catalog/freshness.py)). Then the last built catalog is loaded, C(all) gets
    C(maand_catalog_stale) (what changed) and one warning names what changed and the build to run.
  - With O(preview=true) the bucket is instead read, placed and validated in memory exactly as
    C(maand.core.build) would (C(ansible-inventory --graph) before any build). Nothing is written.
  - Read-only; it never writes the catalog.
  - "When the bucket cannot be used (missing, invalid or stale catalog, invalid maand.conf; in preview
    mode any build error), no host is added and C(all) gets C(maand_workspace_ok: false) and
    C(maand_inventory_errors) (one string per error, naming the file, the field and the fix); the
    errors are printed. The source itself does not fail (Ansible would only warn and drop it), so the
    first play of every maand.core playbook that needs the workers asserts C(maand_workspace_ok) on
    localhost and the run fails whatever C(ansible.cfg) says; a playbook of your own should do the
    same (or rely on C(host_pattern_mismatch = error): no C(maand_*) group exists then)."
  - A file that is not a C(maand.core.workspace) source (wrong C(plugin:) value, unknown option) fails
    to parse as any inventory plugin does.
  - "Groups: C(maand_workers) (every worker in workers.json), C(maand_removed_workers) (workers that left
    workers.json but still hold allocations in the catalog), C(maand_departed_workers) (workers that left
    workers.json and that C(maand.core.gc) has not cleaned yet: the catalog's C(departed) list; never in
    C(maand_workers); the group carries the connection variables, C(maand_bucket_id), C(maand_bucket_dir)
    and C(maand_departed=true), so a host added to it with C(ansible.builtin.add_host) is reachable too), C(job_<job>) (workers with an active allocation
    of the job), C(label_<label>) and C(zone_<zone>). A name that is not a valid group name as it stands
    (characters other than a-z, 0-9 and _) has those characters replaced by C(_) and C(_<8 hex digits of
    its SHA-1>) appended, so C(api-staging) becomes C(job_api_staging_<hash>) and never collides with C(api_staging)."
  - "Host variables: C(maand_worker), C(maand_allocations), C(maand_catalog_jobs) (the catalog records of the
    jobs allocated on that host), C(maand_bucket_id), C(maand_bucket_dir) and the connection variables from
    maand.conf. Variables on C(all): C(maand_workspace_ok) (bool), C(maand_inventory_errors) (list of
    strings, empty when ok), C(maand_inventory_preview) (bool, true with O(preview)), C(maand_bucket_id),
    C(maand_bucket_dir). The whole job table is in C(data/catalog.json)."
author:
  - maand.core developers (@maand-sh)
requirements:
  - jsonschema (controller); fastjsonschema is used when installed, for speed
extends_documentation_fragment:
  - ansible.builtin.constructed
  - ansible.builtin.inventory_cache
options:
  plugin:
    description: Marks this file as a maand.core.workspace source.
    required: true
    type: str
    choices: [maand.core.workspace]
  bucket:
    description:
      - The bucket directory (holding C(maand.conf) and C(workspace/)).
      - A relative path is taken relative to the folder of this inventory file.
      - Defaults to the folder of this inventory file.
    type: path
  preview:
    description:
      - Read the workspace and place every job in memory, as C(maand.core.build) would, instead of
        reading C(data/catalog.json); for C(ansible-inventory --graph) before the first build.
      - Build warnings are printed. C(maand_inventory_preview) is true on C(all); deploy reads the
        catalog only, so build before deploying.
    type: bool
    default: false
"""

EXAMPLES = r"""
# <bucket>/maand.yml: the bucket is this file's folder; reads data/catalog.json
plugin: maand.core.workspace

# Look at the placement before the first build (ansible-inventory -i maand.yml --graph):
#   plugin: maand.core.workspace
#   preview: true

# A second file, elsewhere/prod.maand.yml, could point at a bucket kept in another folder and add
# constructed groups:
#   plugin: maand.core.workspace
#   bucket: ../buckets/prod
#   groups:
#     big_workers: maand_worker.memory_mb >= 16384
#   keyed_groups:
#     - key: maand_worker.tags.rack
#       prefix: rack
"""

import hashlib
import os
import sys

from ansible import context
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable

from ansible_collections.maand.core.plugins.plugin_utils import catalog
from ansible_collections.maand.core.plugins.plugin_utils.catalog import freshness
from ansible_collections.maand.core.plugins.plugin_utils.bucket import Bucket, load_maand_conf
from ansible_collections.maand.core.plugins.plugin_utils.bucket import group_name
from ansible_collections.maand.core.plugins.plugin_utils.bucket import Report
from ansible_collections.maand.core.plugins.plugin_utils import bucket
from ansible_collections.maand.core.plugins.plugin_utils import adapter

MAX_CHANGES_SHOWN = 10
GROUPS = ("maand_workers", "maand_removed_workers", "maand_departed_workers")


def _fingerprint_stat(bucket_dir):
    """Changes whenever a file the build reads changes, so a cached inventory is never stale."""
    digest = hashlib.sha1()
    paths = [os.path.join(bucket_dir, "maand.conf"), os.path.join(bucket_dir, "data", "catalog.json")]
    for root, dirs, files in os.walk(os.path.join(bucket_dir, "workspace")):
        dirs.sort()
        paths.extend(os.path.join(root, name) for name in sorted(files))
    for path in paths:
        try:
            stat = os.stat(path)
        except OSError:
            continue
        digest.update(("%s:%d:%d\n" % (path, stat.st_mtime_ns, stat.st_size)).encode("utf-8", "surrogateescape"))
    return digest.hexdigest()[:16]


def _build_command(bucket_dir):
    return "ansible-playbook maand.core.build -e maand_bucket=%s" % bucket_dir


def _connection(the_bucket):
    conf = the_bucket.conf
    return {
        "ansible_user": conf.get("ssh_user"),
        "ansible_port": conf.get("ssh_port"),
        "ansible_ssh_private_key_file": the_bucket.ssh_key_path,
        "ansible_become": bool(conf.get("use_sudo")),
    }


def _reported_by_the_play():
    """True under ansible-playbook running maand.core playbooks only. The ones that need the inventory
    check that it loaded in their first task (maand.core.preflight names the errors, once); the
    others (build, init, facts, explain, job_create, cat) read the bucket themselves, and a first build
    would otherwise open with "ErrMissingCatalog ... has not been built" above the build that builds it."""
    if not os.path.basename(sys.argv[0] if sys.argv else "").startswith("ansible-playbook"):
        return False
    playbooks = context.CLIARGS.get("args") or ()
    return bool(playbooks) and all(str(name).startswith("maand.core.") for name in playbooks)


def _failure(bucket_dir, errors, bucket_id=None):
    return {"bucket_dir": bucket_dir, "errors": errors, "bucket_id": bucket_id}


def _stale_allowed():
    """True under ansible-playbook running only maand.core playbooks whose policy lets them use the last built
    catalog of a stale workspace (catalog/freshness.py); the others (deploy, gc, a playbook of the user's,
    ansible-inventory) get the ErrStaleCatalog failure."""
    if not os.path.basename(sys.argv[0] if sys.argv else "").startswith("ansible-playbook"):
        return False
    return freshness.allows_stale(str(name) for name in context.CLIARGS.get("args") or ())


def load_from_catalog(bucket_dir, allow_stale=False):
    """The inventory data from data/catalog.json, or a failure naming the file and the fix when the
    catalog is missing, invalid or older than the workspace (its input fingerprint differs); with
    `allow_stale`, the last built catalog of a stale workspace, with what changed (`stale`)."""
    rel = catalog.CATALOG_REL
    try:
        cat = catalog.read_catalog(bucket_dir)
    except catalog.CatalogError as exc:
        return _failure(bucket_dir, ["ErrInvalidCatalog: %s (fix: restore it from git or a backup, then run %s)"
                                     % (exc, _build_command(bucket_dir))])
    except bucket.StateStoreError as exc:
        return _failure(bucket_dir, ["ErrStateStore: %s" % exc])
    if cat is None:
        return _failure(bucket_dir, [
            "ErrMissingCatalog: %s: not found; the bucket has not been built (fix: run %s; or set 'preview: true' "
            "in maand.yml to look at the placement before a build)" % (rel, _build_command(bucket_dir))])
    changes = catalog.stale(bucket_dir, cat)
    if changes and not allow_stale:
        shown = changes[:MAX_CHANGES_SHOWN] + (["and %d more" % (len(changes) - MAX_CHANGES_SHOWN)]
                                               if len(changes) > MAX_CHANGES_SHOWN else [])
        return _failure(bucket_dir, [
            "ErrStaleCatalog: %s: workspace changed since the last build; run maand.core.build (%s) (fix: run %s; "
            "status, health_check, job, run_command, cat, info and logs still run on the last built catalog)"
            % (rel, "; ".join(shown), _build_command(bucket_dir))], bucket_id=cat["bucket_id"])
    the_bucket, report = Bucket(bucket_dir), Report()
    load_maand_conf(the_bucket, report)
    if not report.ok:
        return _failure(bucket_dir, [str(p) for p in report.errors], bucket_id=cat["bucket_id"])
    return {"bucket_dir": the_bucket.path, "catalog": cat, "connection": _connection(the_bucket), "preview": False,
            "stale": changes}


def load_preview(bucket_dir, warn):
    """The inventory data of an in-memory build (nothing written): for --graph before any build."""
    result = catalog.compute(bucket_dir)
    if not result.report.ok:
        return _failure(bucket_dir, [str(p) for p in result.report.errors],
                        bucket_id=(result.previous or {}).get("bucket_id"))
    for warning in result.report.warnings:
        warn("maand.core.workspace: %s" % warning)
    return {"bucket_dir": result.bucket.path, "catalog": result.catalog, "connection": _connection(result.bucket),
            "preview": True}


INVENTORY_FILES = ("maand.yml", "maand.yaml")


def bucket_holding(path, levels=8):
    """The bucket folder (a folder with maand.yml and workspace/) that holds path, a file other than the
    bucket's maand.yml, or None. Ansible walks a folder given to -i file by file: every file of a
    bucket folder is claimed so that `-i <bucket>` gives one error naming <bucket>/maand.yml instead
    of a parse error per file (maand.conf, ansible.cfg, workspace/...)."""
    path = os.path.abspath(path)
    if os.path.basename(path) in INVENTORY_FILES:
        return None
    folder = os.path.dirname(path)
    for dummy in range(levels):
        if os.path.isdir(os.path.join(folder, "workspace")) and any(
                os.path.isfile(os.path.join(folder, name)) for name in INVENTORY_FILES):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent
    return None


def folder_error(bucket_dir, path):
    inventory = next((os.path.join(bucket_dir, n) for n in INVENTORY_FILES if os.path.isfile(os.path.join(bucket_dir, n))),
                     os.path.join(bucket_dir, "maand.yml"))
    given = "" if os.path.abspath(path) == bucket_dir else " (or a file in it: %s)" % os.path.relpath(path, bucket_dir)
    return ("ErrInventoryPath: -i was given the maand bucket folder %s%s, not its inventory file. Fix: pass -i %s, "
            "or run from %s without -i (its ansible.cfg, written by maand.core.init, sets inventory = maand.yml)"
            % (bucket_dir, given, inventory, bucket_dir))


def folder_sources():
    """The -i sources of this run that are bucket folders (a folder with workspace/): under Ansible's
    default enable_plugins this plugin only sees the folder's maand.yml (through `auto`)."""
    try:
        from ansible import context
        sources = context.CLIARGS.get("inventory") or ()
    except Exception:  # pylint: disable=broad-except  # no CLI (a unit test, ansible-runner's API)
        return set()
    return {os.path.abspath(s) for s in sources
            if isinstance(s, str) and "," not in s and os.path.isdir(os.path.join(s, "workspace"))}


class InventoryModule(BaseInventoryPlugin, Constructable, Cacheable):
    NAME = "maand.core.workspace"

    # Bucket folders passed to -i in this process (see bucket_holding): their maand.yml adds no host either.
    folders_passed = set()

    def verify_file(self, path):
        if not super().verify_file(path):
            return False
        return path.endswith(INVENTORY_FILES) or bucket_holding(path) is not None

    def parse(self, inventory, loader, path, cache=True):
        bucket_dir = bucket_holding(path)
        if bucket_dir is not None:
            BaseInventoryPlugin.parse(self, inventory, loader, path, cache)
            self._refuse_folder(bucket_dir, bucket_dir if os.path.abspath(bucket_dir) in folder_sources() else path)
            return
        super().parse(inventory, loader, path, cache)
        folder = os.path.dirname(os.path.abspath(path))
        if folder in folder_sources():
            self._refuse_folder(folder, folder)
            return
        self._read_config_data(path)  # raises for a file that is not a maand.core.workspace source
        adapter.fork_memory.install()  # the controller's full collections stop copying its heap into every fork
        bucket_dir = self.get_option("bucket") or "."
        bucket_dir = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(path)), bucket_dir))
        preview = bool(self.get_option("preview"))

        use_cache = self.get_option("cache") and cache
        key = None
        if self.get_option("cache"):
            key = "%s_%s_%s" % (self.get_cache_key(path), _fingerprint_stat(bucket_dir), "p" if preview else "c")
        data = None
        if use_cache:
            try:
                data = self._cache[key]
            except KeyError:
                data = None
        if data is None:
            data = load_preview(bucket_dir, self.display.warning) if preview else load_from_catalog(
                bucket_dir, allow_stale=_stale_allowed())
            if self.get_option("cache") and not data.get("errors") and not data.get("stale"):
                self._cache[key] = data
        if data["bucket_dir"] in self.folders_passed:
            return  # the bucket folder itself was passed to -i: _refuse_folder set the error
        if data.get("errors"):
            self._populate_failure(data)
        else:
            self._populate(data)

    def _refuse_folder(self, bucket_dir, path):
        """A file of a bucket folder given to -i (usually the folder itself): no host, one error naming
        <bucket>/maand.yml, and the first play of the maand.core playbooks fails with it."""
        if bucket_dir in self.folders_passed:
            return
        self.folders_passed.add(bucket_dir)
        for group in GROUPS:  # the folder's maand.yml may have been read first
            if group in self.inventory.groups:
                for host in list(self.inventory.groups[group].get_hosts()):
                    self.inventory.remove_host(host)
                self.inventory.remove_group(group)
        self._populate_failure({"errors": [folder_error(bucket_dir, path)], "bucket_dir": bucket_dir, "bucket_id": None})

    def _populate_failure(self, data):
        """No hosts; `all` says why (maand_workspace_ok false, maand_inventory_errors) so the first play
        of every maand.core playbook fails naming the errors, whatever ansible.cfg says."""
        errors = data["errors"]
        for name, value in (("maand_workspace_ok", False), ("maand_inventory_errors", errors),
                            ("maand_inventory_preview", False), ("maand_bucket_dir", data["bucket_dir"]),
                            ("maand_bucket_id", data["bucket_id"])):
            self.inventory.set_variable("all", name, value)
        text = "maand bucket %s cannot be used (%d error%s); no host was added to the inventory:\n%s" % (
            data["bucket_dir"], len(errors), "" if len(errors) == 1 else "s", "\n".join(errors))
        # Not raised: Ansible would turn it into a warning (unless ansible.cfg says otherwise) and drop the
        # variables above with the source; a build must also still run with -i maand.yml.
        if _reported_by_the_play():
            self.display.vvv(text)
        else:
            self.display.error(text, wrap_text=False)

    def _populate(self, data):
        inventory = self.inventory
        cat = data["catalog"]
        bucket_id = cat["bucket_id"]
        jobs = {job["name"]: job for job in cat["jobs"]}
        strict = self.get_option("strict")
        compose = self.get_option("compose")
        groups = self.get_option("groups")
        keyed_groups = self.get_option("keyed_groups")

        for name in GROUPS:
            inventory.add_group(name)
        # Only small values on "all": ansible-inventory --list copies group vars into every host, so a
        # job table here would be copied 10,000 times. Job records go to the hosts that run them.
        for name, value in (("maand_workspace_ok", True), ("maand_inventory_errors", []),
                            ("maand_inventory_preview", data["preview"]), ("maand_bucket_dir", data["bucket_dir"]),
                            ("maand_bucket_id", bucket_id), ("maand_catalog_stale", data.get("stale") or [])):
            inventory.set_variable("all", name, value)
        if data.get("stale"):  # the one warning of a verb that runs on the last built catalog (freshness.py)
            self.display.warning(freshness.stale_warning(data["bucket_dir"], data["stale"]))

        per_worker = {}
        for alloc in cat["allocations"]:
            per_worker.setdefault(alloc["worker"], []).append({
                "job": alloc["job"], "alloc_id": alloc["alloc_id"], "state": alloc["state"],
                "deployment_seq": alloc["deployment_seq"], "memory_mb": alloc["memory_mb"],
                "cpu_mhz": alloc["cpu_mhz"], "zone": alloc["zone"], "version": jobs.get(alloc["job"], {}).get("version"),
            })

        group_cache = {}

        def group(prefix, name):
            key = (prefix, name)
            if key not in group_cache:
                group_cache[key] = inventory.add_group(group_name(prefix, name))
            return group_cache[key]

        connection = data["connection"]
        for worker in cat["workers"]:
            host = worker["host"]
            allocations = per_worker.get(host, [])
            if worker.get("removed"):
                if not allocations:
                    continue
                inventory.add_host(host, group="maand_removed_workers")
            else:
                inventory.add_host(host, group="maand_workers")
                for label in worker["labels"]:
                    inventory.add_host(host, group=group("label", label))
                if worker.get("zone"):
                    inventory.add_host(host, group=group("zone", worker["zone"]))
                for alloc in allocations:
                    if alloc["state"] == "active":
                        inventory.add_host(host, group=group("job", alloc["job"]))
            inventory.set_variable(host, "ansible_host", host)
            for name, value in connection.items():
                inventory.set_variable(host, name, value)
            inventory.set_variable(host, "maand_bucket_id", bucket_id)
            inventory.set_variable(host, "maand_bucket_dir", data["bucket_dir"])
            inventory.set_variable(host, "maand_worker", {
                k: worker.get(k) for k in ("host", "labels", "tags", "zone", "position", "memory_mb", "cpu_mhz",
                                           "removed")
            })
            inventory.set_variable(host, "maand_allocations", allocations)
            inventory.set_variable(host, "maand_catalog_jobs", {a["job"]: jobs[a["job"]] for a in allocations
                                                                if a["job"] in jobs})
            if compose or groups or keyed_groups:
                hostvars = inventory.get_host(host).get_vars()
                self._set_composite_vars(compose, hostvars, host, strict=strict)
                self._add_host_to_composed_groups(groups, hostvars, host, strict=strict)
                self._add_host_to_keyed_groups(keyed_groups, hostvars, host, strict=strict)
        self._populate_departed(cat, data)

    def _populate_departed(self, cat, data):
        """maand_departed_workers: the catalog's departed list (workers that left workers.json, kept until
        maand.core.gc cleaned them). The group holds the connection (maand.conf's, as for every worker), so
        the hosts gc adds to it (-e maand_departed=h1,h2) are reachable the same way."""
        inventory = self.inventory
        group = "maand_departed_workers"
        for name, value in dict(data["connection"], maand_bucket_id=cat["bucket_id"],
                                maand_bucket_dir=data["bucket_dir"], maand_departed=True).items():
            inventory.set_variable(group, name, value)
        for record in cat.get("departed") or ():
            host = record["host"]
            known = host in inventory.hosts  # a removed worker that still holds allocation rows
            inventory.add_host(host, group=group)
            if not known:
                inventory.set_variable(host, "ansible_host", host)
                inventory.set_variable(host, "maand_worker", {"host": host, "hostname": record.get("hostname"),
                                                              "removed": True})
                inventory.set_variable(host, "maand_allocations", [])
                inventory.set_variable(host, "maand_catalog_jobs", {})
