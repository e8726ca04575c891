// PLACEHOLDER (branch setup13): the real plugin comes from the PLUGIN helper's branch
// (plugin13); take that file when merging. This stand-in exists only so `cairn setup opencode`
// builds and its tests run: it is a valid OpenCode plugin that does nothing but carries the
// one line `cairn setup` rewrites.

const BAKED_CAIRN_BIN: string | null = null; // cairn setup writes the binary's path here

export const CairnPlaceholder = async () => {
  void BAKED_CAIRN_BIN;
  return {};
};
