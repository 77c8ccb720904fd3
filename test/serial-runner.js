// jest's own runner, made to run its files in the jest process one after
// another (as --runInBand does) while the default runner's files run in
// parallel workers. jest runs one runner's files, then the next runner's, so
// the files of this runner never overlap with any other file.
const { default: TestRunner } = require('jest-runner');

module.exports = class SerialRunner extends TestRunner {
  isSerial = true;
};
