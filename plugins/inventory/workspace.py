# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: workspace
short_description: Workers, allocations and job groups of a maand bucket
version_added: 1.0.0
description:
  - Reads a maand bucket (C(maand.conf), C(workspace/workers.json), C(workspace/jobs/*/manifest.json),
    C(workspace/bucket.conf), C(workspace/bucket.jobs[.<selector>].conf), C(workspace/disabled.json))
    and the previous catalog C(data/catalog.json), places every job exactly as C(maand.core.build) would,
    validates the result and exposes workers as hosts.
  - Read-only; it never writes the catalog. Run the C(maand.core.build) playbook to persist it.
  - When the workspace is invalid the source fails with every problem listed, before any host is added.
    Make that fatal with C([inventory] unparsed_is_failed = True) and C(any_unparsed_is_failed = True)
    in C(ansible.cfg) (the C(maand.core.init) playbook writes them).
  - "Groups: C(maand_workers) (every worker in workers.json), C(maand_removed_workers) (workers that left
    workers.json but still hold allocations in the catalog), C(job_<job>) (workers with an active allocation
    of the job), C(label_<label>) and C(zone_<zone>). A name that is not a valid group name as it stands
    (characters other than a-z, 0-9 and _) has those characters replaced by C(_) and C(_<8 hex digits of
    its SHA-1>) appended, so C(api-staging) becomes C(job_api_staging_<hash>) and never collides with C(api_staging)."
  - "Host variables: C(maand_worker), C(maand_allocations), C(maand_catalog_jobs) (the catalog records of the
    jobs allocated on that host), C(maand_bucket_id), C(maand_bucket_dir) and the connection variables from
    maand.conf. Variables on C(all): C(maand_workspace_ok), C(maand_bucket_id), C(maand_bucket_dir).
    The whole job table is in C(data/catalog.json)."
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
"""

EXAMPLES = r"""
# <bucket>/maand.yml: the bucket is this file's folder
plugin: maand.core.workspace

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

from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable

from ansible_collections.maand.core.plugins.plugin_utils import _build
from ansible_collections.maand.core.plugins.plugin_utils._naming import group_name


def _fingerprint(bucket_dir):
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


class InventoryModule(BaseInventoryPlugin, Constructable, Cacheable):
    NAME = "maand.core.workspace"

    def verify_file(self, path):
        return super().verify_file(path) and path.endswith(("maand.yml", "maand.yaml"))

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        bucket_dir = self.get_option("bucket") or "."
        bucket_dir = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(path)), bucket_dir))

        use_cache = self.get_option("cache") and cache
        key = "%s_%s" % (self.get_cache_key(path), _fingerprint(bucket_dir)) if self.get_option("cache") else None
        data = None
        if use_cache:
            try:
                data = self._cache[key]
            except KeyError:
                data = None
        if data is None:
            data = self._compute(bucket_dir)
            if self.get_option("cache"):
                self._cache[key] = data
        self._populate(data)

    def _compute(self, bucket_dir):
        result = _build.compute(bucket_dir)
        if not result.report.ok:
            errors = result.report.errors
            raise AnsibleParserError(
                "maand bucket %s is invalid (%d error%s); nothing was added to the inventory:\n%s"
                % (bucket_dir, len(errors), "" if len(errors) == 1 else "s", result.report.error_text())
            )
        for warning in result.report.warnings:
            self.display.warning("maand.core.workspace: %s" % warning)
        bucket = result.bucket
        conf = bucket.conf
        return {
            "bucket_dir": bucket.path,
            "catalog": result.catalog,
            "connection": {
                "ansible_user": conf.get("ssh_user"),
                "ansible_port": conf.get("ssh_port"),
                "ansible_ssh_private_key_file": bucket.ssh_key_path,
                "ansible_become": bool(conf.get("use_sudo")),
            },
        }

    def _populate(self, data):
        inventory = self.inventory
        catalog = data["catalog"]
        bucket_id = catalog["bucket_id"]
        jobs = {job["name"]: job for job in catalog["jobs"]}
        strict = self.get_option("strict")
        compose = self.get_option("compose")
        groups = self.get_option("groups")
        keyed_groups = self.get_option("keyed_groups")

        inventory.add_group("maand_workers")
        inventory.add_group("maand_removed_workers")
        # Only small values on "all": ansible-inventory --list copies group vars into every host, so a
        # job table here would be copied 10,000 times. Job records go to the hosts that run them.
        for name, value in (("maand_workspace_ok", True), ("maand_bucket_dir", data["bucket_dir"]),
                            ("maand_bucket_id", bucket_id)):
            inventory.set_variable("all", name, value)

        per_worker = {}
        for alloc in catalog["allocations"]:
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
        for worker in catalog["workers"]:
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
