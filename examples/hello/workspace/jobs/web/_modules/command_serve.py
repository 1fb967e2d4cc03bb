"""maand runs this for `maand job_command command_serve` (maand.core checks it exists but does not run it)."""
print("web serving")
