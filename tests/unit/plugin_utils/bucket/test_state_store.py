"""The state store seam without a server: which store a bucket uses, the bucket folder store behaving as
the files always did, URL checks (never a password printed, never one in maand.conf), and the named
error when psycopg is missing. The PostgreSQL backend itself: tests/integration/test_state_pg.py."""

from __future__ import annotations

import os
import sys

import pytest

from ansible_collections.maand.core.plugins.plugin_utils.bucket import state_pg, storage
from ansible_collections.maand.core.plugins.plugin_utils.bucket.model import Bucket, load_maand_conf
from ansible_collections.maand.core.plugins.plugin_utils.bucket.problems import Report
from ansible_collections.maand.core.plugins.plugin_utils.catalog import catalog as _catalog

URL = "postgresql://maand@db.example.com:5433/maand_prod"


@pytest.fixture(autouse=True)
def no_env_url(monkeypatch):
    monkeypatch.delenv(storage.URL_ENV, raising=False)


def conf(tmp_path, text):
    (tmp_path / "maand.conf").write_text(text)
    return str(tmp_path)


def test_the_bucket_folder_is_the_store_unless_a_url_is_set(tmp_path, monkeypatch):
    bucket = conf(tmp_path, 'ssh_user = "agent"\n')
    assert storage.state_url(bucket) == "" and storage.store(bucket).kind == "file"
    conf(tmp_path, 'state_url = "%s"\n' % URL)
    assert storage.state_url(bucket) == URL
    monkeypatch.setenv(storage.URL_ENV, "postgresql://other@db2/maand")
    assert storage.state_url(bucket) == "postgresql://other@db2/maand"  # the environment wins (AWX injects it)
    assert storage.store(bucket).kind == "postgresql" and storage.store(bucket).label == "postgresql://other@db2/maand"
    assert storage.store(bucket) is storage.store(bucket)


def test_a_url_that_is_not_postgresql_is_refused_by_name(tmp_path, monkeypatch):
    bucket = conf(tmp_path, "")
    monkeypatch.setenv(storage.URL_ENV, "mysql://root:hunter2@db/maand")
    with pytest.raises(storage.StateStoreError) as info:
        storage.store(bucket)
    assert "MAAND_STATE_URL" in str(info.value) and "postgresql://" in str(info.value)
    assert "hunter2" not in str(info.value)


def test_the_file_store_reads_and_writes_the_data_files(tmp_path):
    bucket = conf(tmp_path, "")
    store = storage.store(bucket)
    assert store.read("kv") is None and not store.exists("kv")
    store.write("kv", '{"format": 2, "namespaces": {}}\n')
    store.write("catalog", "{}\n")
    assert (tmp_path / "data" / "kv.json").read_text() == '{"format": 2, "namespaces": {}}\n'
    assert oct((tmp_path / "data" / "kv.json").stat().st_mode & 0o777) == "0o600"
    assert oct((tmp_path / "data" / "catalog.json").stat().st_mode & 0o777) == "0o600"  # data files are the controller user's alone (issue 21)
    assert store.read("catalog").text == "{}\n" and store.read("catalog").generation is None
    assert sorted(store.documents()) == ["catalog", "kv"]


def test_redact_and_has_password():
    assert state_pg.redact("postgresql://u:secret@h:5/db?sslmode=require&password=x") == \
        "postgresql://u@h:5/db?sslmode=require"
    assert state_pg.has_password("postgresql://u:secret@h/db")
    assert state_pg.has_password("postgresql://u@h/db?password=x")
    assert not state_pg.has_password(URL)


@pytest.mark.parametrize("url, shown", [
    ("postgresql://u:s3cretpw@h/db", "postgresql://u@h/db"),
    ("postgresql://u:ab%zzs3cretpw@h/db", "postgresql://u@h/db"),
    ("postgresql://u:p@ss-word@h/db", "postgresql://u@h/db"),  # libpq: password p, host ss-word@h; urllib: p@ss-word
    ("postgresql://u:pa?ss-word@h/db", "postgresql://u@h/db"),  # urllib ends the authority at ?, libpq does not
    ("postgresql://u@h/db?%70assword=s3cretpw&sslmode=disable", "postgresql://u@h/db?sslmode=disable"),
    ("postgresql://u@h/db?PASSWORD=s3cretpw", "postgresql://u@h/db"),
    ("postgresql://u@h/db?sslpassword=s3cretpw#x", "postgresql://u@h/db"),
    ("postgresql://u@h/db?sslmode=require", "postgresql://u@h/db?sslmode=require"),
])
def test_redact_removes_every_password_libpq_reads(url, shown):
    """Issue 32 N7: a %-encoded key (libpq decodes keys), sslpassword, and the readings of libpq and urllib."""
    assert state_pg.redact(url) == shown
    assert state_pg.has_password(url) == (shown != url)


def test_scrub_removes_the_secrets_of_a_url_from_a_message():
    url = "postgresql://u:ab%zzs3cretpw@h/db"
    assert state_pg.secrets_in(url) == {"ab%zzs3cretpw"}
    assert state_pg.scrub('invalid percent-encoded token: "ab%zzs3cretpw"', state_pg.secrets_in(url)) == \
        'invalid percent-encoded token: "***"'
    assert state_pg.secrets_in("postgresql://u@h/db?password=p%40ss") == {"p%40ss", "p@ss"}
    assert state_pg.scrub('port "ab" and ab', {"ab"}) == 'port "***" and ab'  # a short one only where quoted


def test_a_password_in_the_environment_url_is_refused_as_in_maand_conf():
    with pytest.raises(storage.StateStoreError) as info:
        storage.check_url("postgresql://u@h/db?%70assword=s3cretpw", "MAAND_STATE_URL")
    assert "MAAND_STATE_URL postgresql://u@h/db holds a password, which is refused as in maand.conf" in str(info.value)
    assert "s3cretpw" not in str(info.value) and "PGPASSWORD" in str(info.value)
    assert storage.check_url(URL, "MAAND_STATE_URL") == URL


def load_conf(bucket):
    model, report = Bucket(bucket), Report()
    load_maand_conf(model, report)
    return model, report


def test_maand_conf_accepts_state_url_and_refuses_a_password_or_another_scheme(tmp_path):
    model, report = load_conf(conf(tmp_path, 'state_url = "%s"\n' % URL))
    assert report.ok and not report.warnings and model.conf["state_url"] == URL
    model, report = load_conf(conf(tmp_path, 'state_url = "postgresql://maand:pw-in-git@db/maand"\n'))
    assert [(p.kind, p.field) for p in report.errors] == [("ErrInvalidMaandConf", "state_url")]
    assert "pw-in-git" not in str(report.errors[0]) and "PGPASSWORD" in str(report.errors[0])
    model, report = load_conf(conf(tmp_path, 'state_url = "sqlite:///x.db"\n'))
    assert [(p.kind, p.field) for p in report.errors] == [("ErrInvalidMaandConf", "state_url")]
    model, report = load_conf(conf(tmp_path, "state_url = 5\n"))
    assert [(p.kind, p.field) for p in report.errors] == [("ErrInvalidMaandConf", "state_url")]


def test_without_psycopg_a_postgresql_url_is_a_named_error_with_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg now raises ImportError
    bucket = conf(tmp_path, 'state_url = "%s"\n' % URL)
    with pytest.raises(storage.StateStoreError) as info:
        _catalog.read_catalog(bucket)
    assert "psycopg" in str(info.value) and state_pg.INSTALL in str(info.value)


def test_the_stale_checkout_check_is_off_for_the_bucket_folder(tmp_path):
    bucket = conf(tmp_path, "")
    assert _catalog.check_checkout(bucket) is None
    assert not os.path.exists(os.path.join(bucket, "data"))
