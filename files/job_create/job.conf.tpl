# Rendered on each worker by maand.core.deploy (Go text/template, maand's KV functions; docs/templates.md).
# @port@ is this job's pool port: maand.core.build took it from port_min..port_max in bucket.conf.
port = {{ get "maand/bucket" "@port@" }}
version = {{ .NewVersion }}
