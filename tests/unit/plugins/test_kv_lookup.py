"""lookup('maand.core.kv', ...) reads the store build writes; secrets only with reveal=true."""

from __future__ import annotations

import os

import pytest
import yaml
from ansible import constants as C
from ansible.errors import AnsibleLookupError

from ansible_collections.maand.core.plugins.lookup import kv as _kv
from ansible_collections.maand.core.plugins.plugin_utils.catalog import service as _service
from ansible_collections.maand.core.plugins.plugin_utils.kv import store as _store
from tests.unit.plugin_utils.catalog.test_kv_build import bucket


@pytest.fixture(scope="module")
def lookup():
    """The plugin with its documented options registered, as the plugin loader would."""
    options = yaml.safe_load(_kv.DOCUMENTATION)["options"]
    C.config.initialize_plugin_configuration_definitions("lookup", "maand.core.kv", options)
    plugin = _kv.LookupModule()
    plugin._load_name = "maand.core.kv"
    return plugin


@pytest.fixture()
def built(tmp_path):
    root = bucket(tmp_path)
    assert _service.build(root).written
    store = _store.KVStore.load(root)
    store.put("secrets/job/api", "db_password", "p@ss-123")
    store.save()
    return root


def test_reads_values_and_namespaces_from_the_store(lookup, built):
    assert lookup.run(["vars/job/api", "service_name"], {}, bucket=built) == ["api-gateway"]
    [ns] = lookup.run(["maand/job/api"], {}, bucket=built)
    assert ns["workers"] == "10.0.0.1,10.0.0.2"
    assert lookup.run(["vars/job/api", "nope"], {}, bucket=built, default="d") == ["d"]
    with pytest.raises(AnsibleLookupError, match="key nope not found in namespace vars/job/api"):
        lookup.run(["vars/job/api", "nope"], {}, bucket=built)


def test_secrets_need_reveal(lookup, built):
    with pytest.raises(AnsibleLookupError, match="pass reveal=true"):
        lookup.run(["secrets/job/api", "db_password"], {}, bucket=built)
    assert lookup.run(["secrets/job/api", "db_password"], {}, bucket=built, reveal=True) == ["p@ss-123"]
    os.unlink(os.path.join(built, "secrets", "kv.key"))
    with pytest.raises(AnsibleLookupError, match="secrets/kv.key is missing"):
        lookup.run(["secrets/job/api", "db_password"], {}, bucket=built, reveal=True)
    # other namespaces still read without the key
    assert lookup.run(["vars/job/api", "service_name"], {}, bucket=built) == ["api-gateway"]


def test_private_keys_of_issued_certificates_need_reveal(lookup, built):
    """Security review L2: a leaf key reads as a secret does; a whole-namespace read masks it."""
    store = _store.KVStore.load(built)
    ns = "maand/job/api/worker/10.0.0.1"
    store.namespaces[ns]["certs/tls.key"] = _store.Entry("-----BEGIN PRIVATE KEY-----")
    store.namespaces[ns]["certs/tls.crt"] = _store.Entry("-----BEGIN CERTIFICATE-----")
    store.dirty = True
    store.save()
    with pytest.raises(AnsibleLookupError, match="certs/tls.key of %s is a private key; pass reveal=true" % ns):
        lookup.run([ns, "certs/tls.key"], {}, bucket=built)
    assert lookup.run([ns, "certs/tls.crt"], {}, bucket=built) == ["-----BEGIN CERTIFICATE-----"]
    assert lookup.run([ns, "certs/tls.key"], {}, bucket=built, reveal=True) == ["-----BEGIN PRIVATE KEY-----"]
    [whole] = lookup.run([ns], {}, bucket=built)
    assert whole["certs/tls.key"] == "***" and whole["certs/tls.crt"] == "-----BEGIN CERTIFICATE-----"
    [whole] = lookup.run([ns], {}, bucket=built, reveal=True)
    assert whole["certs/tls.key"] == "-----BEGIN PRIVATE KEY-----"


def test_read_rules_apply_with_job(lookup, built):
    with pytest.raises(AnsibleLookupError, match="vars/job/other namespace is not available for job api"):
        lookup.run(["vars/job/other", "x"], {}, bucket=built, job="api", worker_ip="10.0.0.1")
