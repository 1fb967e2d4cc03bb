# Rendered by maand.core.deploy for each worker (Go text/template, maand's KV functions).
greeting = {{ get "vars/bucket" "greeting" }}
worker = {{ .WorkerIP }} (allocation {{ get (printf "maand/job/store/worker/%s" .WorkerIP) "store_allocation_index" }} of {{ get "maand/job/store" "workers_length" }})
peers = {{ get (printf "maand/job/store/worker/%s" .WorkerIP) "peer_workers" }}
web = {{ range $i, $w := split (get "maand/worker" "web_workers") "," }}{{ if $i }} {{ end }}http://{{ $w }}:{{ get "maand/bucket" "http_port" }}/{{ end }}
version = {{ .NewVersion }}
