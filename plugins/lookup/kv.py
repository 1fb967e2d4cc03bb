# -*- coding: utf-8 -*-
# Copyright: (c) 2026, maand.core developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: kv
author: maand.core developers (@maand-sh)
version_added: "1.1.0"
short_description: read maand's KV store of a bucket
description:
  - Reads the KV namespaces that maand's build computes for a bucket (C(maand/bucket),
    C(vars/bucket), C(maand/worker), C(maand/worker/<ip>), C(maand/worker/<ip>/tags),
    C(maand/job/<job>), C(maand/job/<job>/worker/<ip>), C(vars/bucket/job/<job>), C(vars/job/<job>)),
    so playbooks and roles read the same values as a job's C(.tpl) templates.
  - The values come from the KV store build keeps in C(<bucket>/data/kv.json), else (a bucket
    built before the store existed) they are computed from C(<bucket>/data/catalog.json) and the
    jobs' C(vars.toml).
  - With O(job) and O(worker_ip), maand's read rules apply as for that job's templates on that
    worker (its own namespaces, the bucket's, its worker's and those of O(upstream_jobs)).
  - Secrets (C(secrets/job/<job>)) are read only with O(reveal=true); they are decrypted with the
    bucket's C(secrets/kv.key). Mark a task that shows them C(no_log).
  - The private keys of issued certificates (C(certs/<name>.key) of C(maand/job/<job>/worker/<ip>))
    are read the same way - only with O(reveal=true); a whole-namespace read masks them as C(***).
options:
  _terms:
    description:
      - The namespace, then zero or more keys. With no key the whole namespace is returned as a
        dict; with keys, their values (strings).
    required: true
    type: list
    elements: string
  bucket:
    description: The bucket directory.
    type: path
    required: true
    vars:
      - name: maand_bucket
  default:
    description: The value for a missing key or namespace. Without it a missing key fails.
    type: raw
  job:
    description: Apply the read rules of this job (requires O(worker_ip)).
    type: string
  worker_ip:
    description: The worker of the job's allocation, for the read rules.
    type: string
  upstream_jobs:
    description: Jobs O(job) demands; their namespaces become readable.
    type: list
    elements: string
    default: []
  reveal:
    description:
      - Decrypt and return C(secrets/job/<job>) values (otherwise a secrets namespace is refused), and return
        the private keys of issued certificates (otherwise refused, or masked in a whole-namespace read).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: The port the api job got from the pool
  ansible.builtin.debug:
    msg: "{{ lookup('maand.core.kv', 'maand/bucket', 'api_http_port', bucket='/srv/bucket') }}"

- name: Every key of a job's variables, as a dict
  ansible.builtin.debug:
    msg: "{{ lookup('maand.core.kv', 'vars/job/api', bucket=maand_bucket) }}"

- name: Optional value, read with the api job's rules on one worker
  ansible.builtin.debug:
    msg: "{{ lookup('maand.core.kv', 'maand/job/api/worker/10.0.0.1', 'peer_workers', job='api',
             worker_ip='10.0.0.1', default='') }}"

- name: A job's secret (decrypted with secrets/kv.key)
  ansible.builtin.set_fact:
    db_password: "{{ lookup('maand.core.kv', 'secrets/job/api', 'db_password', reveal=true) }}"
  no_log: true
"""

RETURN = r"""
_raw:
  description:
    - With a namespace only, one dict of its keys and values.
    - With keys, their values in the order asked for.
  type: list
  elements: raw
"""

from ansible.errors import AnsibleLookupError  # noqa: E402
from ansible.plugins.lookup import LookupBase  # noqa: E402

from ansible_collections.maand.core.plugins.plugin_utils import catalog  # noqa: E402

from ansible_collections.maand.core.plugins.plugin_utils import kv  # noqa: E402

_UNSET = object()


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        if not terms:
            raise AnsibleLookupError("maand.core.kv: give a namespace, then keys")
        namespace, keys = str(terms[0]), [str(k) for k in terms[1:]]
        reveal = bool(self.get_option("reveal"))
        if kv.is_secret_ns(namespace) and not reveal:
            raise AnsibleLookupError("maand.core.kv: %s is a secrets namespace; pass reveal=true to"
                                     " decrypt it (and mark the task no_log)" % namespace)
        if not reveal and any(kv.is_private_key(namespace, key) for key in keys):
            raise AnsibleLookupError("maand.core.kv: %s of %s is a private key; pass reveal=true to read it (and mark"
                                     " the task no_log)" % (", ".join(k for k in keys if kv.is_private_key(namespace, k)),
                                                            namespace))
        try:
            store = catalog.read_kv(self.get_option("bucket"), reveal_secrets=reveal and kv.is_secret_ns(namespace))
            self._check_rules(namespace)
        except kv.KVError as exc:
            raise AnsibleLookupError("maand.core.kv: %s" % exc) from None
        default = self.get_option("default") if "default" in kwargs else _UNSET
        values = store.get(namespace)
        if not keys:
            if values is None and default is _UNSET:
                raise AnsibleLookupError("maand.core.kv: no namespace %s in the bucket's KV"
                                         % namespace)
            if values is None:
                return [default]
            return [{k: "***" if kv.is_private_key(namespace, k) and not reveal else v for k, v in values.items()}]
        return [self._value(values or {}, namespace, key, default) for key in keys]

    def _check_rules(self, namespace):
        job, worker_ip = self.get_option("job"), self.get_option("worker_ip")
        if job is None:
            return
        if not worker_ip:
            raise kv.KVError("job= needs worker_ip= (a job's read rules depend on its worker)")
        reader = kv.KVReader({}, job, worker_ip, tuple(self.get_option("upstream_jobs") or ()))
        reader.check(namespace)

    @staticmethod
    def _value(values, namespace, key, default):
        if key in values:
            return values[key]
        if default is not _UNSET:
            return default
        raise AnsibleLookupError("maand.core.kv: key %s not found in namespace %s (build the"
                                 " bucket, or pass default=)" % (key, namespace))
