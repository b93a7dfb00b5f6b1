"""torch_ppo_minatar.py: PPO in PyTorch on one thread on calf's MinAtar envs, the anchor calf's
conv PPO is measured against (issue 37).

The network is MinAtar's: Conv2d(C, 16, 3, stride 1, no padding) and ReLU, then
Linear(1024, 128) and ReLU, separate for the actor (then Linear(128, actions), a
categorical policy) and the critic (then Linear(128, 1)), as calf's PPO keeps its actor and
value networks apart. The envs are calf's own (`calf.make_vec`, observations (N, 10, 10, C)
uint8 in row, column, channel order, permuted to NCHW floats), so both sides step the same games; the
PPO work is PureJaxRL's MinAtar settings: 64 envs x 128 steps, GAE (gamma 0.99, lambda
0.95), 4 epochs of 8 minibatches, clip 0.2, entropy 0.01, value weight 0.5, Adam 5e-4
(eps 1e-5) decaying linearly, gradient norm clipped to 0.5, advantages normalized per
minibatch. Prints env steps per second of the whole training loop (acting, stepping,
GAE, updates) over wall time and over this process's CPU time, and the mean return of
the episodes that ended.

Run: PYTHONPATH=build/python /usr/bin/python3 bench/torch_ppo_minatar.py [--iterations N]
(Debian's python3-torch; `--env MinAtar/Breakout-v1` for the minimal action set).
"""
import argparse
import os
import time

import numpy as np
import torch
from torch import nn

import calf


def conv_trunk(channels: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(channels, 16, 3, stride=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(16 * 8 * 8, 128), nn.ReLU())


class ActorCritic(nn.Module):
    def __init__(self, channels: int, actions: int) -> None:
        super().__init__()
        self.actor = nn.Sequential(conv_trunk(channels), nn.Linear(128, actions))
        self.critic = nn.Sequential(conv_trunk(channels), nn.Linear(128, 1))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.actor(x), self.critic(x).squeeze(-1)


def to_nchw(obs: np.ndarray, channels: int) -> torch.Tensor:
    """(N, 10, 10, C) uint8 in (row, column, channel) order -> (N, C, 10, 10) float32."""
    return torch.from_numpy(obs).view(-1, 10, 10, channels).permute(0, 3, 1, 2).float()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="MinAtar/Breakout-v0")
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--num_envs", type=int, default=64)
    parser.add_argument("--unroll", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--minibatches", type=int, default=8)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    envs = calf.make_vec(args.env, args.num_envs, seed=args.seed)
    channels = envs.obs_dim // 100
    actions = int(envs.single_action_space.n)
    net = ActorCritic(channels, actions)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr, eps=1e-5)
    T, N = args.unroll, args.num_envs
    batch = T * N
    mb = batch // args.minibatches
    gamma, lam, clip, ent_coef, vf_coef = 0.99, 0.95, 0.2, 0.01, 0.5

    obs_buf = torch.zeros((T, N, channels, 10, 10))
    act_buf = torch.zeros((T, N), dtype=torch.long)
    logp_buf = torch.zeros((T, N))
    val_buf = torch.zeros((T, N))
    rew_buf = torch.zeros((T, N))
    done_buf = torch.zeros((T, N))
    obs_np, _ = envs.reset(seed=args.seed)
    obs = to_nchw(obs_np, channels)
    ep_ret = np.zeros(N)
    finished: list[float] = []

    t_wall, t_cpu = time.perf_counter(), time.process_time()
    for it in range(args.iterations):
        for g in opt.param_groups:
            g["lr"] = args.lr * (1.0 - it / args.iterations)
        with torch.no_grad():
            for t in range(T):
                logits, value = net(obs)
                dist = torch.distributions.Categorical(logits=logits)
                a = dist.sample()
                obs_buf[t] = obs
                act_buf[t] = a
                logp_buf[t] = dist.log_prob(a)
                val_buf[t] = value
                obs_np, r, term, trunc, _ = envs.step(a.numpy())
                done = np.logical_or(term, trunc)
                rew_buf[t] = torch.from_numpy(r.astype(np.float32))
                done_buf[t] = torch.from_numpy(done.astype(np.float32))
                ep_ret += r
                finished.extend(ep_ret[done].tolist())
                ep_ret[done] = 0.0
                obs = to_nchw(obs_np, channels)
            _, next_value = net(obs)
            adv = torch.zeros((T, N))
            last = torch.zeros(N)
            for t in reversed(range(T)):
                nv = next_value if t == T - 1 else val_buf[t + 1]
                nonterminal = 1.0 - done_buf[t]
                delta = rew_buf[t] + gamma * nv * nonterminal - val_buf[t]
                last = delta + gamma * lam * nonterminal * last
                adv[t] = last
            ret = adv + val_buf
        b_obs = obs_buf.reshape(batch, channels, 10, 10)
        b_act, b_logp = act_buf.reshape(batch), logp_buf.reshape(batch)
        b_adv, b_ret = adv.reshape(batch), ret.reshape(batch)
        for _ in range(args.epochs):
            perm = torch.randperm(batch)
            for k in range(args.minibatches):
                idx = perm[k * mb:(k + 1) * mb]
                logits, value = net(b_obs[idx])
                dist = torch.distributions.Categorical(logits=logits)
                ratio = torch.exp(dist.log_prob(b_act[idx]) - b_logp[idx])
                a_mb = b_adv[idx]
                a_mb = (a_mb - a_mb.mean()) / (a_mb.std() + 1e-8)
                pg = -torch.min(ratio * a_mb, torch.clamp(ratio, 1 - clip, 1 + clip) * a_mb).mean()
                vf = 0.5 * ((value - b_ret[idx]) ** 2).mean()
                loss = pg + vf_coef * vf - ent_coef * dist.entropy().mean()
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(net.parameters(), 0.5)
                opt.step()
    wall, cpu = time.perf_counter() - t_wall, time.process_time() - t_cpu
    steps = args.iterations * batch
    mean = float(np.mean(finished[-100:])) if finished else float("nan")
    print(f"torch {torch.__version__} PPO on {args.env}, 1 thread: {args.iterations} iterations of "
          f"{N} envs x {T} steps; load average {os.getloadavg()[0]:.1f}")
    print(f"env steps/s: {steps / wall:.0f} (wall), {steps / cpu:.0f} (per CPU second); "
          f"{len(finished)} episodes ended, mean return of the last 100 {mean:.2f}")


if __name__ == "__main__":
    main()
