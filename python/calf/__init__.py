"""calf from Python: calf's environments as a Gymnasium 1.x vector environment, the
stepwise trainer, and trained policies acting on NumPy arrays.

``calf.make_vec(name, num_envs, seed)`` returns a vector env stepped by calf's C library
into NumPy arrays (``calf._calf``), auto-resetting in the same step as calf's trainer
does (Gymnasium's SAME_STEP mode). When Gymnasium is importable it is a
``gymnasium.vector.VectorEnv`` with ``gymnasium.spaces``; when it is not, calf's own
minimal ``Box``/``Discrete``/``MultiDiscrete`` carry the same attributes.

``calf.load_policy(root_dir)`` opens a run's greedy policy, the one ``calf play`` runs;
``calf.train(conf, root_dir=...)`` runs the job ``calf train`` runs, and
``calf.Trainer(conf, root_dir=...)`` trains it one iteration at a time (both also
without a gin file: ``algorithm="ppo", env=..., total_timesteps=...`` and
hyperparameters by SB3's and CleanRL's names; ``calf.list_bindings()`` lists calf's);
``calf.read_scalars(root_dir)`` reads a run's summaries as NumPy arrays, as TensorBoard
reads them. ``python3 -m calf`` is the ``calf`` program.
"""

from __future__ import annotations

from calf import _calf
from calf._envs import EnvError, register_env
from calf._job import train
from calf._names import list_bindings
from calf._policy import Policy, load_policy
from calf._scalars import Scalars, read_scalars
from calf._spaces import Box, Discrete, MultiDiscrete
from calf._trainer import Trainer
from calf._vec_env import VecEnv, make_vec
from calf._vec_env import _export_calf_to_plugins  # noqa: F401 (python3 -m calf's)

__version__: str = _calf.__version__
__all__ = [
    "Box",
    "Discrete",
    "EnvError",
    "MultiDiscrete",
    "Policy",
    "Scalars",
    "Trainer",
    "VecEnv",
    "env_names",
    "features",
    "list_bindings",
    "load_policy",
    "make_vec",
    "register_env",
    "read_scalars",
    "train",
    "__version__",
]

# The public names say they are calf's, as NumPy's set_module does for numpy's: reprs,
# help() and pickles read as they did when all of them lived in this file (a checkpoint
# holds a Python env's pickle, which may hold calf's spaces).
for _public in (Box, Discrete, MultiDiscrete, Policy, Scalars, Trainer, VecEnv,
                list_bindings, load_policy, make_vec, read_scalars, train):
    _public.__module__ = __name__
del _public


def features() -> dict[str, str]:
    """What this build holds, as ``calf --version`` says.

    Returns ``{"mpi": note, "mujoco": note, "video": note, "kernels": variant}``; each
    note is ``"built in ..."`` or ``"not built: ..."`` saying why and how to get it, and
    variant names the hot kernels' variant this process runs (``"fma (...)"``).
    """
    return _calf.features()


def env_names() -> list[str]:
    """The registered environment names, built-ins first."""
    return _calf.env_names()
