"""The package's layout: one private module per concern behind the one public namespace.

``calf.X`` is the API whichever module holds X: ``__all__`` names what the package
exports, every public class and function says it is calf's (as NumPy's set_module makes
numpy's), so a pickle of calf's spaces (which a Python env's checkpoint may hold) names
``calf.Box`` as it did when one file held them, and every module says what it holds.
"""

from __future__ import annotations

import pathlib
import pickle
import pickletools

import numpy as np

import calf

PUBLIC = ["Box", "Discrete", "EnvError", "MultiDiscrete", "Policy", "Scalars", "Trainer",
          "VecEnv", "env_names", "features", "list_bindings", "load_policy", "make_vec",
          "register_env", "read_scalars", "train", "__version__"]


def test_all_names() -> None:
    assert calf.__all__ == PUBLIC
    for name in PUBLIC:
        assert hasattr(calf, name), name


def test_public_names_are_calfs() -> None:
    for name in PUBLIC:
        obj = getattr(calf, name)
        if name in ("EnvError", "register_env", "__version__"):
            continue  # _envs.py's own, as they always were
        assert obj.__module__ == "calf", name
    assert repr(calf.Box) == "<class 'calf.Box'>"


def test_space_pickle_names_calf() -> None:
    data = pickle.dumps(calf.Box(-1.0, 1.0, (2,), np.float32), protocol=4)
    names = [arg for op, arg, _ in pickletools.genops(data) if op.name == "SHORT_BINUNICODE"]
    assert names[:2] == ["calf", "Box"]
    assert pickle.loads(data).shape == (2,)


def test_every_module_says_what_it_holds() -> None:
    pkg = pathlib.Path(calf.__file__).parent
    modules = sorted(p.stem for p in pkg.glob("*.py"))
    assert {"_spaces", "_vec_env", "_policy", "_trainer", "_job", "_scalars"} <= set(modules)
    for stem in modules:
        if stem == "__main__":
            continue  # running it runs the calf program
        mod = __import__(f"calf.{stem}" if stem != "__init__" else "calf", fromlist=["_"])
        assert mod.__doc__ and len(mod.__doc__.strip()) > 40, stem
