/** The folders of src/ and the folders each may import, besides itself (scripts/draw-layers.ts draws them). */
export declare const LAYERS: Record<string, readonly string[]>;
declare const config: unknown;
export default config;
