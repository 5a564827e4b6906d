import numpy as np, simbatch

def train(iterations=15, num_envs=1024, horizon=100, elite=64, seed=0):
    env = simbatch.VectorEnv("BallOnPlate-v0", num_envs, settings={"max_episode_steps": horizon})
    rng, (o, a) = np.random.default_rng(seed), (env.single_observation_space.shape[0], env.single_action_space.shape[0])
    mean, std, history = np.zeros((o, a)), np.ones((o, a)), []
    for it in range(iterations):             # cross-entropy method: one linear policy per env
        W = mean + std * rng.standard_normal((num_envs, o, a))
        obs, _ = env.reset(seed=seed + it)
        ret, alive = np.zeros(num_envs), np.ones(num_envs, bool)
        for _ in range(horizon):
            obs, r, term, trunc, _ = env.step(np.tanh(np.einsum("no,noa->na", obs, W)))
            ret += r * alive; alive &= ~(term | trunc)
        best = W[np.argsort(ret)[-elite:]]; mean, std = best.mean(0), best.std(0) + 1e-2
        history.append(ret.mean()); print(f"iteration {it}: mean return {ret.mean():.2f}")
    return mean, history

if __name__ == "__main__":
    train()
