"""Build hook: a wheel (and `pip install .`) carries the configs and the sample corpus.

`configs/*.json` and `data/` stay at the top of the repository, the one copy that is checked in.
Building a wheel copies them into the package as `electra_tf/_resources/configs/` and
`electra_tf/_resources/data/`, where `electra_tf/paths.py` looks first; an editable install
(`pip install -e .`) and a checkout read them in place. Everything else is in setup.cfg.
"""

import glob
import os

from setuptools import setup
from setuptools.command.build_py import build_py

# Top-level folder -> the files of it the package ships (MANIFEST.in puts the same in an sdist).
RESOURCES = {"configs": ("*.json",), "data": ("sample_corpus.txt", "README.md")}


class BuildPyWithResources(build_py):
    """build_py that also copies RESOURCES into <build_lib>/electra_tf/_resources/."""

    def _resource_files(self):
        for folder, patterns in RESOURCES.items():
            for pattern in patterns:
                for source in sorted(glob.glob(os.path.join(folder, pattern))):
                    yield source, os.path.join(self.build_lib, "electra_tf", "_resources", folder,
                                               os.path.basename(source))

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads configs/ and data/ where they are
        copied = list(self._resource_files())
        if not any(os.path.basename(s) == "tiny.json" for s, _ in copied):
            raise SystemExit("error: configs/tiny.json is missing: build from the root of a checkout or an sdist")
        for source, target in copied:
            self.mkpath(os.path.dirname(target))
            self.copy_file(source, target, preserve_mode=False)

    def get_outputs(self, include_bytecode=True):
        outputs = super().get_outputs(include_bytecode)
        if not getattr(self, "editable_mode", False):
            outputs += [target for _, target in self._resource_files()]
        return outputs


setup(cmdclass={"build_py": BuildPyWithResources})
