"""Training with blockmap.learn

`blockmap.learn` is metatensor-learn's API (`Dataset`, `DataLoader`, the
`nn` modules) on blockmap's maps. Its samples and batches pickle, so its
`DataLoader` works with worker processes (metatensor-learn's own hangs
there), and a batch's maps are joined by `blockmap.join`. Here a linear
model of per-atom contributions learns energies that are a linear function
of the descriptors; autograd flows through the `nn` modules to the
parameters.
"""

import numpy as np
import torch

import blockmap
import blockmap.learn as learn

N_PROPERTIES = 4
TRUE_WEIGHTS = torch.tensor([0.5, -1.0, 2.0, 0.25], dtype=torch.float64)


def structure(i, generator):
    """A torch-backed map of ``n`` atoms' descriptors, and its energy."""
    n = 2 + i % 5
    values = torch.rand(n, N_PROPERTIES, dtype=torch.float64, generator=generator)
    samples = blockmap.Labels(["system", "atom"], np.array([[i, a] for a in range(n)]))
    block = blockmap.TensorBlock(values, samples, [], blockmap.Labels.range("n", N_PROPERTIES))
    energy = (values @ TRUE_WEIGHTS).sum().reshape(1)
    return blockmap.TensorMap(blockmap.Labels.range("_", 1), [block]), energy


def main():
    generator = torch.Generator().manual_seed(0)
    maps, energies = zip(*(structure(i, generator) for i in range(64)), strict=True)
    dataset = learn.Dataset(descriptor=list(maps), energy=list(energies))
    print(dataset[0])

    torch.manual_seed(0)
    model = learn.nn.Linear(dataset[0].descriptor.keys, in_features=N_PROPERTIES, out_features=1)
    model = model.to(torch.float64)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.2)
    loader = learn.DataLoader(
        dataset,
        batch_size=16,
        shuffle=True,
        num_workers=2,
        persistent_workers=True,
        generator=torch.Generator().manual_seed(0),
    )

    losses = []
    for epoch in range(20):
        total = 0.0
        for batch in loader:  # a named tuple: one joined map, a (16, 1) tensor
            assert isinstance(batch.descriptor, blockmap.TensorMap)
            per_atom = model(batch.descriptor)  # a map of per-atom energies
            # sum each structure's atoms: the first sample column is the
            # structure; the join keeps the batch's order
            systems = per_atom.block(0).samples.values[:, 0].tolist()
            row = {system: k for k, system in enumerate(dict.fromkeys(systems))}
            index = torch.tensor([row[system] for system in systems])
            predicted = torch.zeros(len(batch.energy), 1, dtype=torch.float64)
            predicted = predicted.index_add(0, index, per_atom.block(0).values)
            loss = ((predicted - batch.energy) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
        losses.append(total / len(loader))
        if epoch % 5 == 0 or epoch == 19:
            print(f"epoch {epoch:2d}: mean squared error {losses[-1]:.5f}")

    assert losses[-1] < losses[0] / 20, losses
    weights = model.module_map.module_list[0].weight.detach().reshape(-1)
    print("learned weights:", [round(float(w), 2) for w in weights])
    assert torch.allclose(weights, TRUE_WEIGHTS, atol=0.5), weights


if __name__ == "__main__":  # spawned workers import this file
    main()
