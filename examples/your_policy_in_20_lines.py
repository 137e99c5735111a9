"""Your policy against lyra through the harness, in 20 lines: python examples/your_policy_in_20_lines.py"""
from lyra_gym import ALLOC_JOB_FEATURES, CLUSTER_FEATURES, JOB, JOB_FEATURES, PLACE, PROPOSAL, RETURN, WORKER_LEVELS

K, W = 32, len(JOB_FEATURES) + len(ALLOC_JOB_FEATURES)  # LyraGym/Alloc-v1: job slots, width of a job row
PHASE = K * W + len(CLUSTER_FEATURES)  # where the one-hot phase (borrow, return, job, place) starts
def make():  # the factory a `policy:` spec names; it returns the policy: observation, masks -> action
    def policy(obs, action_masks):
        rows, phase, valid = obs[:K * W].reshape(K, W), obs[PHASE:PHASE + 4].argmax(), action_masks.nonzero()[0]
        if phase == JOB:  # decide each queued job in turn (row columns 0, 1: present, queued)
            queued = [i for i in range(K) if action_masks[i] and rows[i, 0] and rows[i, 1]]
            return queued[0] if queued else K + 1  # then "auto": lyra's proposal for the jobs left
        if phase == PLACE:  # the most workers that fit on training GPUs (values 2..), else lyra's proposal
            return max([v for v in valid if 2 <= v < 2 + WORKER_LEVELS], default=PROPOSAL)
        return 0 if phase == RETURN else valid[-1]  # borrow and return as lyra would
    return policy
if __name__ == "__main__":  # the spec names this file, so the worker processes (--jobs 2) find the policy
    from lyra_gym.cli import main
    raise SystemExit(main(["compare", "--policies", f"lyra,policy:{__file__}:make", "--seeds", "0,1",
                           "--jobs", "2", "--no-plots", "--out", "your-policy-vs-lyra", "--overwrite"]))
