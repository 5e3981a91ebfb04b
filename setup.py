"""The optional C fast lanes of the log parsers (logpipe/engines/<engine>/_fastlane.c, with
the helpers they share in logpipe/engines/columns.h), of the judged counts
(logpipe/_classify.c) and of the copies test's line hashes (logpipe/_lines.c).

``optional=True``: where no C compiler is available the build goes on without it and
logpipe parses every line with the polars parser (same rows, slower).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("logpipe.engines.sglang._fastlane", ["logpipe/engines/sglang/_fastlane.c"],
                  depends=["logpipe/engines/columns.h"], optional=True,
                  extra_compile_args=["-O3", "-std=c11", "-D_GNU_SOURCE"]),
        Extension("logpipe._classify", ["logpipe/_classify.c"], optional=True,
                  extra_compile_args=["-O3", "-std=c11"]),
        Extension("logpipe._lines", ["logpipe/_lines.c"], optional=True,
                  extra_compile_args=["-O3", "-std=c11"]),
        Extension("logpipe.engines.vllm._fastlane", ["logpipe/engines/vllm/_fastlane.c"],
                  depends=["logpipe/engines/columns.h"], optional=True,
                  extra_compile_args=["-O3", "-std=c11", "-D_GNU_SOURCE"]),
    ],
)
