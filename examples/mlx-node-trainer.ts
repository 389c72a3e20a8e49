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
import type { Qwen3Tokenizer } from '@mlx-node/core'
import type { SFTDataset as TrainerDataset, SFTTrainer } from '@mlx-node/trl'

// The one-line switch: `loadSFTDataset` from this package instead of '@mlx-node/trl', with the
// tokenizer the trainer already uses. Every example goes through its own applyChatTemplate, so
// the batches are those of MLX Node's SFTDataset with that tokenizer.
import { Tokenizer, loadSFTDataset } from '../lib'

export async function trainWithYourTokenizer(trainer: SFTTrainer, tokenizer: Qwen3Tokenizer, dataFile: string): Promise<void> {
  const dataset = await loadSFTDataset(dataFile, tokenizer, { maxSeqLength: 2048, completionOnly: true })
  await trainer.train(dataset as unknown as TrainerDataset)
}

// The fast path to the same batches: this package's tokenizer, rendering as MLX Node's does
// (every earlier turn keeps its reasoning), natively and on all cores.
export async function trainWithMlxNode(trainer: SFTTrainer, modelDir: string, dataFile: string): Promise<void> {
  // The model folder of an MLX Node checkpoint holds tokenizer.json and its chat template.
  const tokenizer = await Tokenizer.fromPretrained(modelDir, { renderAs: 'mlx-node' })
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
