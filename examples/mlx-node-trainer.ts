// Training an MLX Node model (Qwen3.5 and the other families its SFT trainer supports) on the
// rows of this package: build the dataset here, hand it to the trainer.
//
// The trainer calls `length`, `numBatches`, `shuffleForEpoch` and `batches` on the dataset;
// this package's SFTDataset has them, with the same batches bit for bit under the default
// settings. TypeScript still rejects it where the trainer is typed with its own class (private
// fields), hence the one cast below.
//
// Which batching strategies fit: the trainer feeds each batch's `inputIds` and `labels` and no
// position ids or attention mask. `'reference'` (the default), `'lengthGrouped'` and
// `'tokenBudget'` give padded rows that it trains on as it would its own. `'packed'` joins several
// examples in one row and is only right with the `positionIds`/`exampleIds` the trainer does not
// read: examples would attend to each other.
import type { SFTDataset as TrainerDataset, SFTTrainer } from '@mlx-node/trl'

import { Tokenizer, loadSFTDataset } from '../lib'

export async function trainWithMlxNode(trainer: SFTTrainer, modelDir: string, dataFile: string): Promise<void> {
  // The model folder of an MLX Node checkpoint holds tokenizer.json and its chat template.
  const tokenizer = await Tokenizer.fromPretrained(modelDir)
  const dataset = await loadSFTDataset(dataFile, tokenizer, {
    maxSeqLength: 2048,
    completionOnly: true,
    // Less padding than the reference order, same trainer: rows of similar length go together.
    batching: 'lengthGrouped',
    // OpenAI-shaped tool calls carry their arguments as JSON strings; Qwen3.5's template needs
    // objects.
    parseToolArguments: true,
  })
  await trainer.train(dataset as unknown as TrainerDataset)
}
