import { defineConfig } from '@playwright/test';

// Run by tests/console/main.rs against a `kairship demo` it started (KAIRSHIP_STATE_DIR).
// Debian's Chromium, headless; Playwright never downloads a browser here.
export default defineConfig({
  testDir: 'tests',
  workers: 1,
  timeout: 120_000,
  expect: { timeout: 15_000 },
  reporter: [['list']],
  outputDir: process.env.CONSOLE_TEST_OUT ?? 'test-results',
  use: {
    browserName: 'chromium',
    headless: true,
    ignoreHTTPSErrors: true,
    viewport: { width: 1400, height: 900 },
    launchOptions: {
      executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-background-networking', '--disable-dev-shm-usage'],
    },
  },
});
