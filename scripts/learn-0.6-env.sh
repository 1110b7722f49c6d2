#!/usr/bin/env bash
# learn-0.6-env.sh PYTHON DIR: a second virtual environment, DIR, for
# blockmap.learn on metatensor-learn 0.6 (what a standalone user of the
# `learn` extra installs; metatrain 2026.4, in .venv, pins < 0.6). Small:
# its own packages are metatensor-learn (constraints-learn-0.6.txt, no
# dependencies: 0.6.2 needs the metatensor-core and -operations .venv
# has) and a module hiding metatrain; everything else (torch, numpy,
# metatensor, pytest, blockmap's editable install) is PYTHON's environment,
# added after DIR's own packages by a .pth file, so nothing is installed
# twice. metatrain stays importable in PYTHON's environment: the hiding
# module makes `import metatrain` raise ModuleNotFoundError in DIR's.
set -euo pipefail
python=$1
dir=$2
rm -rf "$dir"
"$python" -m venv --without-pip "$dir"
own=$("$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
base=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$python" -m pip install --quiet --no-deps --target "$own" -r constraints-learn-0.6.txt
cat >"$own/_without_metatrain.py" <<'PY'
"""This environment has no metatrain (metatrain 2026.4 pins
metatensor-learn < 0.6): `import metatrain` raises ModuleNotFoundError,
although the base environment has it."""
import sys


class _Hidden:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "metatrain" or name.startswith("metatrain."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _Hidden())
PY
# the base environment after this one's packages, its own .pth files
# (blockmap's editable install) processed
printf 'import _without_metatrain\nimport site; site.addsitedir(%s)\n' "'$base'" >"$own/zz-base.pth"
"$dir/bin/python" -W ignore - <<'PY'
import metatensor_learn
from blockmap import _optional
assert metatensor_learn.__version__.startswith("0.6."), metatensor_learn.__version__
assert _optional.find_spec("metatrain") is None
PY
echo "$dir: metatensor-learn $("$dir/bin/python" -c 'import metatensor_learn; print(metatensor_learn.__version__)')"
