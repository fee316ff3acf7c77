"""Compile fairseq's libbleu (the C++ BLEU of ``fairseq-generate``'s default
``--scoring bleu``) in place in an extracted fairseq source tree.

    cd FAIRSEQ_SRC && python3 PROJECT/scripts/build_libbleu.py   # -> fairseq/libbleu*.so

The GPU kit (.gpu/install.sh) runs fairseq from its extracted sdist with only
its Cython data modules compiled; fairseq-generate then stops at
``from fairseq import libbleu`` with its default ``--scoring bleu`` (it
builds the scorer before decoding). The
extension is fairseq's own (setup.py's ``fairseq.libbleu``: the same two
sources and flags); it needs g++ and Python's headers, no CUDA.
"""
import sys

from setuptools import Extension, setup

setup(name="fairseq-libbleu",
      ext_modules=[Extension("fairseq.libbleu",
                             sources=["fairseq/clib/libbleu/libbleu.cpp", "fairseq/clib/libbleu/module.cpp"],
                             extra_compile_args=["-std=c++11", "-O3"])],
      script_args=["build_ext", "--inplace", *sys.argv[1:]])
