// The few public types of @mlx-node/trl that an integration touches, as the package declares
// them (a sketch: only the members used below). Its `SFTDataset` has private fields, and
// TypeScript never treats another class as assignable to a class with private members, even one
// with the same public methods. `examples/mlx-node-trainer.ts` type-checks against this file.
declare module '@mlx-node/trl' {
  export interface SFTBatch {
    inputIds: Int32Array
    labels: Int32Array
    shape: [number, number]
  }

  export class SFTDataset {
    private examples
    private tokenizer
    private config
    get length(): number
    shuffleForEpoch(epoch: number): void
    numBatches(batchSize: number): number
    batches(batchSize: number): AsyncGenerator<SFTBatch>
  }

  export class SFTTrainer {
    /** Trains on a dataset, or on the JSONL file at a path (which it then loads itself). */
    train(dataset: SFTDataset | string): Promise<void>
  }
}
