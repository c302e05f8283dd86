"""The compiled part of the engine (solver/placement/room.pyx); everything else is in
pyproject.toml. `pip install -e .` builds it in place; after editing the .pyx, run that again
(or `python setup.py build_ext --inplace`)."""

from Cython.Build import cythonize
from setuptools import Extension, setup

setup(
    ext_modules=cythonize(
        [Extension("solver.placement.room", ["solver/placement/room.pyx"])],
        compiler_directives={"language_level": 3},
    )
)
