"""python -m metajit: print the version-relevant facts of this installation (for bug reports).
python -m metajit flags: print every METAJIT_* setting (the registry, core/flag_table.cc) with its value now.
Prints only; it changes no setting."""
import sys

import metajit as mj


def print_facts():
    print(f"metajit kernel cache: {mj.flags.cache_dir}")
    print(f"threads: {mj.flags.num_threads}")
    print(f"stats: {mj.stats()}")


def _shown(value):
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def print_flags():
    rows = mj.flags.table()
    width = max(len(row["name"]) for row in rows)
    for row in rows:
        setting = f" [{row['python_setting']}]" if row["python_setting"] else ""
        print(f"{row['name']:<{width}}  {row['type']}{setting}")
        print(f"{'':<{width}}  value: {_shown(row['value'])}   default: {row['default'] or '-'}"
              f"{'   environment: ' + row['environment'] if row['environment'] is not None else ''}")
        print(f"{'':<{width}}  {row['documentation']}")


def main(arguments):
    if not arguments:
        print_facts()
    elif arguments == ["flags"]:
        print_flags()
    else:
        print("usage: python -m metajit [flags]", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
