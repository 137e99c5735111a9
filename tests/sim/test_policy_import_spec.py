"""Issue 27 item 3: a researcher's scheduler or observation -> action policy named by an import spec
(``MODULE:CLASS``, ``policy:MODULE:FACTORY``) runs wherever a policy name is taken; every bad spec
is one error line naming it."""
from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

from loader_entry_points import declare_missing_loaders
from lyra_gym.cli import main as cli_main
from lyra_gym.harness.compare import check_policies
from lyra_gym.run.simulate import simulate
from lyra_gym.sim import scheduler as registry
from lyra_gym.sim.import_spec import SchedulerSpecError, load_object, split_spec
from lyra_gym.workloads.tracegen import generate_trace

# A policy that answers every sub-action with the env's neutral value (borrow: the heuristic's
# choice B; return: the heuristic's; job: auto), so each decision commits lyra's own proposal.
NEUTRAL = '''
import numpy as np

from lyra_gym.envs.alloc_layout import ALLOC_JOB_FEATURES
from lyra_gym.envs.observation import CLUSTER_FEATURES, JOB_FEATURES

K, B = {k}, 4
PHASE = K * (len(JOB_FEATURES) + len(ALLOC_JOB_FEATURES)) + len(CLUSTER_FEATURES)
NEUTRAL = (B, 0, K + 1, 1)  # borrow: the heuristic's; return: the heuristic's; job: auto; place: proposal

class Neutral:
    env_id = "LyraGym/Alloc-v1"
    env_kwargs = {{"num_job_slots": K}}
    calls = 0

    def __call__(self, obs, action_masks):
        Neutral.calls += 1
        return NEUTRAL[int(np.argmax(obs[PHASE:PHASE + 4]))]

def make():
    return Neutral()

class Predicting:
    """SB3's shape: predict(obs, deterministic, action_masks) -> (action, state)."""
    env_kwargs = {{"num_job_slots": K}}

    def predict(self, obs, deterministic=True, action_masks=None):
        assert deterministic is True and action_masks is not None
        return Neutral()(obs, action_masks), None

def make_predicting():
    return Predicting()

def make_bad_action():
    return lambda obs: "stop"

def make_scheduler():
    from lyra_baselines.lyra import LyraScheduler
    return LyraScheduler()

def make_nothing():
    return 42

def make_wrong_env():
    policy = Neutral()
    policy.env_kwargs = {{"reward": "jct"}}
    return policy
'''


@pytest.fixture(scope="module", autouse=True)
def policy_loader(tmp_path_factory):
    """The ``policy:`` loader of pyproject.toml, visible even where the installed metadata predates it."""
    folder = tmp_path_factory.mktemp("entry_points")
    if declare_missing_loaders(folder):
        sys.path.insert(0, str(folder))
        yield
        sys.path.remove(str(folder))
    else:
        yield


@pytest.fixture(scope="module")
def neutral_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("policies") / "neutral_policy.py"
    path.write_text(textwrap.dedent(NEUTRAL.format(k=8)), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def jobs():
    return generate_trace("small-1d", 0)[:60]


# ---------------------------------------------------------------------- MODULE:ATTRIBUTE
def test_split_spec_tells_modules_and_paths_from_other_names():
    assert split_spec("my_pkg.mod:Make") == ("my_pkg.mod", "Make")
    assert split_spec("dir/file.py:Outer.make") == ("dir/file.py", "Outer.make")
    assert split_spec(r"C:\dir\file.py:make") == (r"C:\dir\file.py", "make")
    assert split_spec("model:runs/x/model.zip") is None  # not an attribute name
    assert split_spec("lyra") is None and split_spec("a b:c") is None and split_spec(".py:x") is None


def test_a_scheduler_class_by_import_spec_runs_as_the_registered_one(jobs):
    spec = "lyra_baselines.fifo:FifoScheduler"
    assert registry.is_import_spec(spec) and not registry.is_import_spec("model:x")
    assert registry.make(spec, backfill=True).backfill is True
    assert simulate(jobs, spec, policy_params={"backfill": True}).jobs == \
        simulate(jobs, "fifo", policy_params={"backfill": True}).jobs
    assert registry.declared_reads(spec) == frozenset()  # FifoScheduler.reads
    check_policies([spec], {spec: {"backfill": True}})


def test_a_scheduler_file_by_path(tmp_path, jobs):
    path = tmp_path / "mine.py"
    path.write_text("from lyra_baselines.sjf import SjfScheduler\n\ndef make():\n    return SjfScheduler()\n")
    assert simulate(jobs, f"{path}:make").jobs == simulate(jobs, "sjf").jobs
    assert load_object(f"{path}:make") is load_object(f"{path}:make")  # imported once per process


@pytest.mark.parametrize(("spec", "message"), [
    ("no_such_module_xyz:Make", "cannot import 'no_such_module_xyz' (ModuleNotFoundError"),
    ("lyra_baselines.fifo:Nope", "module 'lyra_baselines.fifo' has no attribute 'Nope'"),
    ("lyra_gym.sim.scheduler:Guidance", "returned a Guidance, not a lyra_gym.sim.scheduler.Scheduler"),
    ("lyra_baselines.fifo:FifoScheduler.name", "str object is not a Scheduler class or factory"),
    ("/no/such/file.py:make", "no file '/no/such/file.py'"),
])
def test_a_bad_scheduler_spec_is_one_error_naming_it(spec, message, capsys):
    with pytest.raises(SchedulerSpecError, match=r"^" + repr(spec).replace("(", r"\(")) as err:
        registry.make(spec)
    assert message in str(err.value)
    assert cli_main(["simulate", "--policy", spec, "--out", "unused"]) == 2
    err_lines = capsys.readouterr().err.strip().splitlines()
    assert len(err_lines) == 1 and err_lines[0].startswith("lyra-gym: error: ") and spec in err_lines[0]


def test_a_module_that_raises_on_import_is_one_error(tmp_path):
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom\\nsecond line')\n")
    with pytest.raises(SchedulerSpecError, match=r"'.*broken.py:make': cannot import .*RuntimeError: boom second line"):
        registry.make(f"{tmp_path / 'broken.py'}:make")


def test_an_unknown_loader_prefix_lists_the_loaders_and_the_import_form():
    with pytest.raises(registry.UnknownSchedulerError,
                       match="unknown scheduler loader 'polcy'.*policy.*MODULE:ATTRIBUTE"):
        registry.make("polcy:examples.alloc_policy:make")


# ---------------------------------------------------------------------- policy:MODULE:FACTORY
def test_a_neutral_observation_policy_reproduces_lyra_bit_for_bit(neutral_file, jobs):
    """Every sub-action neutral -> every decision commits lyra's proposal, which the engine then runs."""
    from lyra_agents.policy_scheduler import AllocPolicyScheduler

    scheduler = registry.make(f"policy:{neutral_file}:make")
    assert isinstance(scheduler, AllocPolicyScheduler) and scheduler.layout.k == 8
    ours, lyra = simulate(jobs, scheduler, seed=3), simulate(jobs, "lyra", seed=3)
    assert ours.jobs == lyra.jobs
    assert scheduler.invalid_actions == 0 and scheduler.model.policy.calls > 0


def test_an_sb3_style_predict_is_asked_with_masks_and_deterministic(neutral_file, jobs):
    ours = simulate(jobs, f"policy:{neutral_file}:make_predicting", seed=1)
    assert ours.jobs == simulate(jobs, "lyra", seed=1).jobs


def test_policy_parameters_reach_the_factory(jobs):
    spec = "policy:examples.alloc_policy:make"
    strict = registry.make(spec, backfill=False, borrow=False)
    assert strict.model.policy.backfill is False and strict.model.policy.borrow is False
    with pytest.raises(TypeError, match="bogus"):
        registry.make(spec, bogus=1)


@pytest.mark.parametrize(("factory", "message"), [
    ("make_scheduler", "returned a Scheduler (plan level); name it '{path}:make_scheduler', without the policy:"),
    ("make_nothing", "returned 42; expected a callable obs -> action or an object with predict"),
    ("make_wrong_env", "env_kwargs 'reward' not allowed"),
    ("nope", "module '{path}' has no attribute 'nope'"),
])
def test_a_bad_policy_spec_is_one_error_naming_it(neutral_file, factory, message, capsys):
    spec = f"policy:{neutral_file}:{factory}"
    with pytest.raises(SchedulerSpecError) as err:
        registry.make(spec)
    assert str(err.value).startswith(repr(spec)) and message.format(path=neutral_file) in str(err.value)
    assert cli_main(["compare", "--policies", f"lyra,{spec}", "--out", "unused"]) == 2
    err_lines = capsys.readouterr().err.strip().splitlines()
    assert len(err_lines) == 1 and spec in err_lines[0]


def test_an_action_outside_the_space_fails_the_run_naming_the_spec(neutral_file, jobs):
    """The default env (K = 32): Discrete(max(K + 2, 2 + 2 x 10 worker options, ...)) = Discrete(34)."""
    scheduler = registry.make(f"policy:{neutral_file}:make_bad_action")
    with pytest.raises(SchedulerSpecError, match=r"the policy returned 'stop'; the action space Discrete\(34\) wants"):
        simulate(jobs, scheduler)


def test_an_observation_policy_acts_on_the_env_observation(neutral_file):
    """What the policy is shown is the env's observation and masks (same sizes, masks as booleans)."""
    scheduler = registry.make(f"policy:{neutral_file}:make")
    seen = []
    inner = scheduler.model.policy

    def spy(obs, action_masks):
        seen.append((np.asarray(obs).shape, np.asarray(action_masks).dtype))
        return inner(obs, action_masks)

    scheduler.model._call = spy
    simulate(generate_trace("small-1d", 0)[:10], scheduler)
    assert seen and set(seen) == {((scheduler.observer.size,), np.dtype(bool))}
