"""What each `lake` command does, as keyword-only `run_<verb>(...)` functions that the CLI, `lake
run`, the scheduler and tests call; the click commands in framework/cli/main.py only parse arguments,
print and choose exit codes."""
