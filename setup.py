"""The optional C fast lane of the log parser (logpipe/engines/sglang/_fastlane.c).

``optional=True``: where no C compiler is available the build goes on without it and
logpipe parses every line with the polars parser (same rows, slower).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("logpipe.engines.sglang._fastlane", ["logpipe/engines/sglang/_fastlane.c"],
                  optional=True,
                  extra_compile_args=["-O3", "-std=c11", "-D_GNU_SOURCE"]),
    ],
)
