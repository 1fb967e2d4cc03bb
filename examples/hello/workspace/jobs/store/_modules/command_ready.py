"""maand runs this for `maand job_command command_ready` (maand.core checks it exists but does not run it)."""
print("store ready")
