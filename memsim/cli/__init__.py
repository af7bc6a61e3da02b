"""The command line: options generated from the declared specs, the commands, the console entry and
the reference page generated from the commands."""
