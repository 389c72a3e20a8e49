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

// The tokenizer of @mlx-node/core as the package declares it (the members the reference
// SFTDataset calls, and loading). It is a native class, built for Apple Silicon only.
declare module '@mlx-node/core' {
  export interface ChatMessage {
    role: string
    content: string
    toolCalls?: Array<{ id?: string; name: string; arguments: string }>
    toolCallId?: string
    reasoningContent?: string
  }

  export class Qwen3Tokenizer {
    static fromPretrained(tokenizerPath: string): Promise<Qwen3Tokenizer>
    applyChatTemplate(
      messages: ChatMessage[],
      addGenerationPrompt?: boolean | null,
      tools?: unknown[] | null,
      enableThinking?: boolean | null,
    ): Promise<Uint32Array>
    tokenToId(token: string): number | null
    getPadTokenId(): number
    getImStartToken(): string
    getImEndToken(): string
  }
}
