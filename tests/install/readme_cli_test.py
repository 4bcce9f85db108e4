"""The README's command table names every option of every command: each subcommand that
`tinycoral --help` lists has a row (or rows) starting with `tinycoral NAME`, and each option its
`--help` prints appears in those rows by its long name or its one-letter alias."""
import pathlib
import re
import subprocess
import sys

source, cli = pathlib.Path(sys.argv[1]), sys.argv[2]
readme = (source / "README.md").read_text()


def help_of(*command):
  return subprocess.run([cli, *command, "--help"], capture_output=True, text=True,
                        check=True).stdout


commands = re.findall(r"^  ([a-z]+)  ", help_of().split("Subcommands:", 1)[1], re.M)
if len(commands) < 5:
  sys.exit("could not read the subcommands from tinycoral --help")
problems = []
for command in commands:
  # (The name ends the prefix: `tinycoral run` must not take `tinycoral runtime`'s rows.)
  rows = "\n".join(line for line in readme.splitlines()
                   if re.match(rf"\| `tinycoral {re.escape(command)}[ `]", line))
  if not rows:
    problems.append(f"no row for `tinycoral {command}`")
    continue
  for short, long in re.findall(r"^\s+(?:(-[a-zA-Z]),)?(--[a-z][a-z0-9_-]*)", help_of(command),
                                re.M):
    if long == "--help":
      continue
    named = re.search(re.escape(long) + r"(?![a-z0-9_-])", rows)
    aliased = short and re.search(r"(?<![\w-])" + re.escape(short) + r"(?![\w-])", rows)
    if not named and not aliased:
      problems.append(f"`tinycoral {command}` row lacks {long}")
if problems:
  sys.exit("README.md's command table is stale:\n  " + "\n  ".join(problems))
print(f"README.md names every option of {len(commands)} commands")
