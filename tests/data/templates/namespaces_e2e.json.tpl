{
  "env": "{{ get "vars/bucket" "environment" }}",
  "service": "{{ get "vars/job/api" "service_name" }}",
  "listen": "{{ get "maand/bucket" "api_http_port" }}",
  "peers": "{{ get (printf "maand/job/api/worker/%s" .WorkerIP) "peer_workers" }}",
  "version": "{{ .NewVersion }}"
}