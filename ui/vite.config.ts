import { defineConfig } from 'vite';

// Served by Kairship at /ui/; the build is committed (ui/dist) and embedded in the binary.
export default defineConfig({
  base: '/ui/',
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // No source maps: they would double the embedded size for little use.
    sourcemap: false,
  },
});
