/** Where one card lives inside its sandbox. Each card gets its own directory, cleared per attempt. */
export interface CardPaths {
  dir: string;
  cardFile: string;
  outputDir: string;
  workDir: string;
  resultFile: string;
  blockedFile: string;
}

export function cardPaths(workdir: string, cardId: string): CardPaths {
  const dir = `${workdir.replace(/\/+$/, '')}/cards/${cardId}`;
  const outputDir = `${dir}/out`;
  return {
    dir,
    cardFile: `${dir}/card.json`,
    outputDir,
    workDir: `${dir}/work`,
    resultFile: `${outputDir}/result.json`,
    blockedFile: `${outputDir}/blocked.json`,
  };
}
