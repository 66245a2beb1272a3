"""The `lake` command line: click commands, printing and exit codes. Each command is thin: it
loads the project and calls one function of framework/commands/."""
